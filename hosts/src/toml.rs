//! TOML (Codex's `config.toml`) read into a [`Node`] tree with byte spans, by `toml_edit`'s
//! parser, which keeps every value's place in the file.

use toml_edit::{Item, Table, Value};

use super::tree::{Kind, Map, Member, Node};

pub fn parse(text: &str) -> Result<Node, String> {
    let document = toml_edit::Document::parse(text).map_err(|e| {
        let line = e
            .span()
            .map(|s| 1 + text[..s.start.min(text.len())].matches('\n').count());
        let mut message = e.message().trim_end().to_owned();
        // toml_edit says "duplicate key" without saying which: the span holds it.
        if message == "duplicate key"
            && let Some(key) = e.span().and_then(|s| text.get(s))
        {
            message = format!(
                "the key {:?} is there twice in the same table; keep one of them",
                key.trim()
            );
        }
        match line {
            Some(line) => format!("line {line}: {message}"),
            None => message,
        }
    })?;
    Ok(table(document.as_table()))
}

fn table(table: &Table) -> Node {
    let members = table
        .iter()
        .map(|(key, item)| Member {
            key: key.to_owned(),
            key_span: table.key(key).and_then(|k| k.span()).unwrap_or(0..0),
            value: self::item(item),
        })
        .collect();
    Node {
        span: table.span().unwrap_or(0..0),
        kind: Kind::Map(Map {
            members,
            inline: false,
        }),
    }
}

fn item(item: &Item) -> Node {
    match item {
        Item::Table(t) => table(t),
        Item::ArrayOfTables(tables) => Node {
            span: tables.span().unwrap_or(0..0),
            kind: Kind::Seq(tables.iter().map(table).collect()),
        },
        Item::Value(v) => value(v),
        Item::None => Node {
            span: 0..0,
            kind: Kind::Other,
        },
    }
}

fn value(value: &Value) -> Node {
    let span = value.span().unwrap_or(0..0);
    let kind = match value {
        Value::String(s) => Kind::Str(s.value().clone()),
        Value::Array(array) => Kind::Seq(array.iter().map(self::value).collect()),
        Value::InlineTable(t) => Kind::Map(Map {
            members: t
                .iter()
                .map(|(key, v)| Member {
                    key: key.to_owned(),
                    key_span: t.key(key).and_then(|k| k.span()).unwrap_or(0..0),
                    value: self::value(v),
                })
                .collect(),
            inline: true,
        }),
        _ => Kind::Other,
    };
    Node { span, kind }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_place() {
        let text = "# c\n[mcp_servers.fs]\ncommand = \"npx\" # why\nargs = [\n  \"-y\",\n]\nenv = { A = \"1\" }\n";
        let node = parse(text).unwrap();
        let fs = &node.map().unwrap().get("mcp_servers").unwrap().value;
        let fs = fs.map().unwrap().get("fs").unwrap().value.map().unwrap();
        let command = &fs.get("command").unwrap().value;
        assert_eq!(&text[command.span.clone()], "\"npx\"");
        assert_eq!(
            &text[fs.get("command").unwrap().key_span.clone()],
            "command"
        );
        let args = &fs.get("args").unwrap().value;
        assert_eq!(&text[args.span.clone()], "[\n  \"-y\",\n]");
        assert_eq!(args.strings(), Some(vec!["-y".to_owned()]));
        assert!(fs.get("env").unwrap().value.map().unwrap().inline);
        let error = parse("[a]\nb = \n").unwrap_err();
        assert!(error.starts_with("line 2: "), "{error}");
    }
}

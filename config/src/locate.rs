//! Key paths (`routes[2].match.host`) and their lines in the TOML source.
//!
//! Validation names a problem by key path; [`line_of`] finds the line of that key in the parsed
//! document. Serde reports a problem by byte span; [`path_at`] finds the key path at that span.

use std::fmt;
use std::ops::Range;

use toml_edit::{Array, ArrayOfTables, InlineTable, Item, Table, Value};

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// A key path from the document root, e.g. `routes[2].match.host`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct KeyPath(Vec<Seg>);

impl KeyPath {
    pub(crate) fn root() -> Self {
        Self::default()
    }

    /// This path extended by a table key.
    pub(crate) fn key(&self, key: &str) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_owned()));
        Self(segs)
    }

    /// This path extended by an array index.
    pub(crate) fn index(&self, index: usize) -> Self {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        Self(segs)
    }

    pub(crate) fn segs(&self) -> &[Seg] {
        &self.0
    }
}

/// Bare keys as written (`match.host`), other keys quoted (`headers."content type"`).
impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Index(index) => write!(f, "[{index}]")?,
                Seg::Key(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    let bare =
                        !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                    if bare {
                        f.write_str(key)?;
                    } else {
                        write!(f, "{key:?}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The 1-based line of the entry at `path`: the line of its key when it has one, else of its
/// value. When the path leads to an entry not written in the file (a default), the line of the
/// deepest written ancestor; `None` when not even the first key is written.
pub(crate) fn line_of(text: &str, root: &Table, path: &[Seg]) -> Option<usize> {
    let mut node = Node::Table(root);
    let mut best = None;
    for seg in path {
        let Some(child) = children(node).into_iter().find(|c| c.seg == *seg) else {
            break;
        };
        best = child.key_span.or(child.span).or(best);
        node = child.node;
    }
    best.map(|span| line_at(text, span.start))
}

/// The key path of the deepest entry whose key or value span contains `offset`.
pub(crate) fn path_at(root: &Table, offset: usize) -> Option<KeyPath> {
    let mut path = KeyPath::root();
    find(Node::Table(root), offset, &mut path).then_some(path)
}

/// The 1-based line containing byte `offset` of `text`.
pub(crate) fn line_at(text: &str, offset: usize) -> usize {
    let before = text.get(..offset).unwrap_or(text);
    before.bytes().filter(|&b| b == b'\n').count() + 1
}

/// Depth-first search; on success `path` holds the path of the deepest match.
fn find(node: Node<'_>, offset: usize, path: &mut KeyPath) -> bool {
    for child in children(node) {
        let in_key = child.key_span.as_ref().is_some_and(|s| contains(s, offset));
        let in_value = child.span.as_ref().is_some_and(|s| contains(s, offset));
        path.0.push(child.seg);
        if in_key || find(child.node, offset, path) || in_value {
            return true;
        }
        path.0.pop();
    }
    false
}

fn contains(span: &Range<usize>, offset: usize) -> bool {
    span.start <= offset && (offset < span.end || span.is_empty() && offset == span.start)
}

#[derive(Clone, Copy)]
enum Node<'a> {
    Table(&'a Table),
    Inline(&'a InlineTable),
    Array(&'a Array),
    Tables(&'a ArrayOfTables),
    Leaf,
}

struct Child<'a> {
    seg: Seg,
    key_span: Option<Range<usize>>,
    span: Option<Range<usize>>,
    node: Node<'a>,
}

fn item_node(item: &Item) -> Node<'_> {
    match item {
        Item::Table(t) => Node::Table(t),
        Item::ArrayOfTables(a) => Node::Tables(a),
        Item::Value(v) => value_node(v),
        Item::None => Node::Leaf,
    }
}

fn value_node(value: &Value) -> Node<'_> {
    match value {
        Value::InlineTable(t) => Node::Inline(t),
        Value::Array(a) => Node::Array(a),
        _ => Node::Leaf,
    }
}

fn children(node: Node<'_>) -> Vec<Child<'_>> {
    match node {
        Node::Table(t) => t
            .iter()
            .filter_map(|(name, _)| t.get_key_value(name))
            .map(|(key, item)| Child {
                seg: Seg::Key(key.get().to_owned()),
                key_span: key.span(),
                span: item.span(),
                node: item_node(item),
            })
            .collect(),
        Node::Inline(t) => t
            .iter()
            .filter_map(|(name, _)| t.get_key_value(name))
            .map(|(key, item)| Child {
                seg: Seg::Key(key.get().to_owned()),
                key_span: key.span(),
                span: item.span(),
                node: item_node(item),
            })
            .collect(),
        Node::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, value)| Child { seg: Seg::Index(i), key_span: None, span: value.span(), node: value_node(value) })
            .collect(),
        Node::Tables(a) => a
            .iter()
            .enumerate()
            .map(|(i, table)| Child {
                seg: Seg::Index(i),
                key_span: None,
                span: table.span(),
                node: Node::Table(table),
            })
            .collect(),
        Node::Leaf => Vec::new(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use toml_edit::ImDocument;

    const TEXT: &str = r#"# comment
[server]
workers = 4
[server.limits]
max_headers = 10

[[routes]]
name = "a"
match = { host = "x", methods = ["GET", "POST"] }

[[routes]]
name = "b"
"#;

    fn path(text: &str) -> Vec<Seg> {
        // Test helper: "routes.1.name" -> [Key(routes), Index(1), Key(name)].
        text.split('.')
            .map(|s| match s.parse() {
                Ok(i) => Seg::Index(i),
                Err(_) => Seg::Key(s.to_owned()),
            })
            .collect()
    }

    #[test]
    fn lines_of_keys_values_and_defaults() {
        let doc = ImDocument::parse(TEXT).unwrap();
        let root = doc.as_table();
        let line = |p: &str| line_of(TEXT, root, &path(p));
        assert_eq!(line("server"), Some(2));
        assert_eq!(line("server.workers"), Some(3));
        assert_eq!(line("server.limits.max_headers"), Some(5));
        assert_eq!(line("routes.0"), Some(7));
        assert_eq!(line("routes.1.name"), Some(12));
        assert_eq!(line("routes.0.match.methods.1"), Some(9));
        // Not written: deepest written ancestor.
        assert_eq!(line("server.timeouts.idle"), Some(2));
        assert_eq!(line("routes.1.cluster"), Some(11));
        assert_eq!(line("clusters.0.name"), None);
    }

    #[test]
    fn path_at_spans() {
        let doc = ImDocument::parse(TEXT).unwrap();
        let root = doc.as_table();
        let at = |needle: &str| {
            let offset = TEXT.find(needle).unwrap();
            path_at(root, offset).map(|p| p.to_string())
        };
        assert_eq!(at("workers").as_deref(), Some("server.workers"));
        assert_eq!(at("10").as_deref(), Some("server.limits.max_headers"));
        assert_eq!(at("\"POST\"").as_deref(), Some("routes[0].match.methods[1]"));
        assert_eq!(at("host").as_deref(), Some("routes[0].match.host"));
        assert_eq!(at("\"b\"").as_deref(), Some("routes[1].name"));
        assert_eq!(at("# comment"), None);
    }

    #[test]
    fn display_quotes_non_bare_keys() {
        let p = KeyPath::root().key("routes").index(1).key("direct_response").key("headers").key("content type");
        assert_eq!(p.to_string(), "routes[1].direct_response.headers.\"content type\"");
        assert_eq!(line_at("a\nb\nc", 2), 2);
        assert_eq!(line_at("a", 99), 1);
    }
}

//! Splits the parsed document into its sections and deserializes each element on its own, so
//! that a wrong key or type in one element is reported without hiding problems elsewhere.

use serde::de::{DeserializeOwned, IntoDeserializer};
use toml_edit::{Item, Table, Value};

use crate::locate::KeyPath;
use crate::problems::Problems;
use crate::raw::{RawCluster, RawListener, RawOverload, RawRoute, RawServer};

/// Top-level keys of the file.
const SECTIONS: [&str; 5] = ["server", "listeners", "routes", "clusters", "overload"];

/// The file, section by section. An array section is `None` when it is not an array at all
/// (already reported), empty when it is absent.
pub(crate) struct RawConfig {
    pub server: Parsed<RawServer>,
    pub listeners: Option<Vec<Parsed<RawListener>>>,
    pub routes: Option<Vec<Parsed<RawRoute>>>,
    pub clusters: Option<Vec<Parsed<RawCluster>>>,
    /// Defaults when absent.
    pub overload: Parsed<RawOverload>,
}

/// One element: deserialized, or broken (its problem already recorded).
pub(crate) enum Parsed<T> {
    Ok(T),
    /// The element's `name`, when it has a readable one: it still counts for uniqueness and
    /// references, so a broken cluster does not also make every route to it "unknown".
    Broken {
        name: Option<String>,
    },
}

impl<T> Parsed<T> {
    pub(crate) fn ok(&self) -> Option<&T> {
        match self {
            Parsed::Ok(value) => Some(value),
            Parsed::Broken { .. } => None,
        }
    }
}

/// Reads every section of the document; problems go to `problems`.
pub(crate) fn split(problems: &mut Problems<'_>) -> RawConfig {
    let root = problems.root();
    for (key, _) in root.iter() {
        if !SECTIONS.contains(&key) {
            problems.at(
                &KeyPath::root().key(key),
                format!("unknown top-level key `{key}` (expected server, listeners, routes, clusters or overload)"),
            );
        }
    }
    RawConfig {
        server: table(problems, root, "server"),
        listeners: elements(problems, root, "listeners"),
        routes: elements(problems, root, "routes"),
        clusters: elements(problems, root, "clusters"),
        overload: table(problems, root, "overload"),
    }
}

/// Deserializes the single-table section `section`, or its defaults when it is absent.
/// An array is refused before serde sees it (serde would read its elements as the table's
/// fields, one by one, and report a confusing type error).
fn table<T: DeserializeOwned + Default>(problems: &mut Problems<'_>, root: &Table, section: &str) -> Parsed<T> {
    let path = KeyPath::root().key(section);
    match root.get(section).and_then(|item| item.clone().into_value().ok()) {
        None => Parsed::Ok(T::default()),
        Some(Value::Array(_)) => {
            problems.at(&path, format!("`{section}` must be a single table: write [{section}], not [[{section}]]"));
            Parsed::Broken { name: None }
        }
        Some(value) => deserialize(problems, value, &path),
    }
}

/// Deserializes each element of the array `section`.
fn elements<T: DeserializeOwned>(problems: &mut Problems<'_>, root: &Table, section: &str) -> Option<Vec<Parsed<T>>> {
    let path = KeyPath::root().key(section);
    let values: Vec<Value> = match root.get(section) {
        None => return Some(Vec::new()),
        Some(Item::ArrayOfTables(tables)) => {
            tables.iter().map(|t| Value::InlineTable(t.clone().into_inline_table())).collect()
        }
        Some(Item::Value(Value::Array(array))) => array.iter().cloned().collect(),
        Some(_) => {
            problems.at(&path, format!("`{section}` must be an array of tables: write [[{section}]] sections"));
            return None;
        }
    };
    let parsed =
        values.into_iter().enumerate().map(|(i, value)| deserialize(problems, value, &path.index(i))).collect();
    Some(parsed)
}

fn deserialize<T: DeserializeOwned>(problems: &mut Problems<'_>, value: Value, path: &KeyPath) -> Parsed<T> {
    let name = value.as_inline_table().and_then(|t| t.get("name")).and_then(Value::as_str).map(str::to_owned);
    match T::deserialize(value.into_deserializer()) {
        Ok(parsed) => Parsed::Ok(parsed),
        Err(error) => {
            problems.serde(path, &error);
            Parsed::Broken { name }
        }
    }
}

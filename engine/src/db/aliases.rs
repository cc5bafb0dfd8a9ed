//! The `aliases` table: a machine's named routes to one or two of its versions, by weight.

use super::{Result, Store};
use rusqlite::{OptionalExtension, params};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasRow {
    pub name: String,
    pub description: Option<String>,
    /// `(version number, weight)`, one or two entries, weights summing to 100.
    pub routing: Vec<(u32, u32)>,
    pub created_ms: i64,
    pub updated_ms: i64,
}

fn alias_row(r: &rusqlite::Row) -> rusqlite::Result<AliasRow> {
    let routing: String = r.get(2)?;
    Ok(AliasRow {
        name: r.get(0)?,
        description: r.get(1)?,
        routing: serde_json::from_str(&routing).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, e.into())
        })?,
        created_ms: r.get(3)?,
        updated_ms: r.get(4)?,
    })
}

const ALIAS_COLUMNS: &str = "name, description, routing, created_ms, updated_ms";

impl Store {
    pub fn alias(&self, machine: i64, name: &str) -> Result<Option<AliasRow>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {ALIAS_COLUMNS} FROM aliases WHERE machine = ? AND name = ?"
            ))?
            .query_row(params![machine, name], alias_row)
            .optional()
    }

    /// A machine's aliases by name, after `after`.
    pub fn aliases(&self, machine: i64, after: &str, limit: u32) -> Result<Vec<AliasRow>> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {ALIAS_COLUMNS} FROM aliases WHERE machine = ? AND name > ? \
             ORDER BY name LIMIT ?"
        ))?;
        let rows = stmt.query_map(params![machine, after, limit], alias_row)?;
        rows.collect()
    }

    pub fn count_aliases(&self, machine: i64) -> Result<u32> {
        self.conn
            .prepare_cached("SELECT count(*) FROM aliases WHERE machine = ?")?
            .query_row([machine], |r| r.get(0))
    }

    /// Inserts or replaces an alias.
    pub fn put_alias(&self, machine: i64, alias: &AliasRow) -> Result<()> {
        let routing = serde_json::to_string(&alias.routing).expect("pairs of numbers serialize");
        self.conn
            .prepare_cached(&format!(
                "INSERT OR REPLACE INTO aliases (machine, {ALIAS_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
            ))?
            .execute(params![
                machine,
                alias.name,
                alias.description,
                routing,
                alias.created_ms,
                alias.updated_ms
            ])?;
        Ok(())
    }

    pub fn delete_alias(&self, machine: i64, name: &str) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM aliases WHERE machine = ? AND name = ?")?
            .execute(params![machine, name])?;
        Ok(())
    }

    /// The aliases that route some starts to a version.
    pub fn aliases_routing_to(&self, machine: i64, number: u32) -> Result<Vec<String>> {
        let all = self.aliases(machine, "", u32::MAX)?;
        Ok(all
            .into_iter()
            .filter(|a| a.routing.iter().any(|(v, _)| *v == number))
            .map(|a| a.name)
            .collect())
    }
}

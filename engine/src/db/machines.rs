//! The `state_machines`, `definitions`, `versions` and `activities` tables: a machine and its
//! revisions (the definition and role each `CreateStateMachine` or `UpdateStateMachine` stored),
//! its published versions, and the activities. Aliases are in `aliases.rs`.

use super::{Result, Store};
use rusqlite::{OptionalExtension, params};

/// One revision of a machine: what executions started on it run, for good.
#[derive(Debug, Clone)]
pub struct DefinitionRow {
    pub id: i64,
    pub body: String,
    pub role_arn: String,
    /// `INITIAL` for the revision `CreateStateMachine` stored, a UUID for each update's.
    pub revision: String,
    pub created_ms: i64,
}

/// A machine with its current revision.
#[derive(Debug, Clone)]
pub struct StateMachineRow {
    pub id: i64,
    pub arn: String,
    pub name: String,
    pub created_ms: i64,
    /// When `UpdateStateMachine` last changed it.
    pub updated_ms: Option<i64>,
    pub current: DefinitionRow,
}

/// A published version: an immutable number naming one revision.
#[derive(Debug, Clone)]
pub struct VersionRow {
    pub number: u32,
    pub definition: i64,
    pub description: Option<String>,
    pub created_ms: i64,
}

const MACHINE_COLUMNS: &str = "m.id, m.arn, m.name, m.created_ms, m.updated_ms, \
     d.id, d.body, d.role_arn, d.revision, d.created_ms";

fn machine_row(r: &rusqlite::Row) -> rusqlite::Result<StateMachineRow> {
    Ok(StateMachineRow {
        id: r.get(0)?,
        arn: r.get(1)?,
        name: r.get(2)?,
        created_ms: r.get(3)?,
        updated_ms: r.get(4)?,
        current: DefinitionRow {
            id: r.get(5)?,
            body: r.get(6)?,
            role_arn: r.get(7)?,
            revision: r.get(8)?,
            created_ms: r.get(9)?,
        },
    })
}

fn version_row(r: &rusqlite::Row) -> rusqlite::Result<VersionRow> {
    Ok(VersionRow {
        number: r.get(0)?,
        definition: r.get(1)?,
        description: r.get(2)?,
        created_ms: r.get(3)?,
    })
}

impl Store {
    /// A machine by its (unqualified) ARN, with its current revision.
    pub fn state_machine(&self, arn: &str) -> Result<Option<StateMachineRow>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {MACHINE_COLUMNS} FROM state_machines m \
                 JOIN definitions d ON d.id = m.current WHERE m.arn = ?"
            ))?
            .query_row([arn], machine_row)
            .optional()
    }

    /// Stores a new machine and its first revision (`INITIAL`).
    pub fn insert_state_machine(
        &self,
        arn: &str,
        name: &str,
        body: &str,
        role_arn: &str,
        now_ms: i64,
    ) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO state_machines (arn, name, created_ms, last_version) VALUES (?, ?, ?, 0)",
            )?
            .execute(params![arn, name, now_ms])?;
        let machine = self.conn.last_insert_rowid();
        let definition = self.insert_definition(machine, body, role_arn, "INITIAL", now_ms)?;
        self.conn
            .prepare_cached("UPDATE state_machines SET current = ? WHERE id = ?")?
            .execute(params![definition, machine])?;
        Ok(())
    }

    /// Adds a revision to a machine and makes it the current one; its id.
    pub fn update_state_machine(
        &self,
        machine: i64,
        body: &str,
        role_arn: &str,
        revision: &str,
        now_ms: i64,
    ) -> Result<i64> {
        let definition = self.insert_definition(machine, body, role_arn, revision, now_ms)?;
        self.conn
            .prepare_cached("UPDATE state_machines SET current = ?, updated_ms = ? WHERE id = ?")?
            .execute(params![definition, now_ms, machine])?;
        Ok(definition)
    }

    fn insert_definition(
        &self,
        machine: i64,
        body: &str,
        role_arn: &str,
        revision: &str,
        now_ms: i64,
    ) -> Result<i64> {
        self.conn
            .prepare_cached(
                "INSERT INTO definitions (machine, body, role_arn, revision, created_ms) \
                 VALUES (?, ?, ?, ?, ?)",
            )?
            .execute(params![machine, body, role_arn, revision, now_ms])?;
        Ok(self.conn.last_insert_rowid())
    }

    pub fn definition(&self, id: i64) -> Result<Option<DefinitionRow>> {
        self.conn
            .prepare_cached(
                "SELECT id, body, role_arn, revision, created_ms FROM definitions WHERE id = ?",
            )?
            .query_row([id], |r| {
                Ok(DefinitionRow {
                    id: r.get(0)?,
                    body: r.get(1)?,
                    role_arn: r.get(2)?,
                    revision: r.get(3)?,
                    created_ms: r.get(4)?,
                })
            })
            .optional()
    }

    pub fn version(&self, machine: i64, number: u32) -> Result<Option<VersionRow>> {
        self.conn
            .prepare_cached(
                "SELECT number, definition, description, created_ms FROM versions \
                 WHERE machine = ? AND number = ?",
            )?
            .query_row(params![machine, number], version_row)
            .optional()
    }

    /// The newest version published from a revision, if any.
    pub fn version_of_definition(
        &self,
        machine: i64,
        definition: i64,
    ) -> Result<Option<VersionRow>> {
        self.conn
            .prepare_cached(
                "SELECT number, definition, description, created_ms FROM versions \
                 WHERE machine = ? AND definition = ? ORDER BY number DESC LIMIT 1",
            )?
            .query_row(params![machine, definition], version_row)
            .optional()
    }

    /// A machine's versions, newest first, below `before` (a version number).
    pub fn versions(
        &self,
        machine: i64,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<VersionRow>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT number, definition, description, created_ms FROM versions \
             WHERE machine = ? AND number < ? ORDER BY number DESC LIMIT ?",
        )?;
        let rows = stmt.query_map(
            params![machine, before.unwrap_or(i64::MAX), limit],
            version_row,
        )?;
        rows.collect()
    }

    pub fn count_versions(&self, machine: i64) -> Result<u32> {
        self.conn
            .prepare_cached("SELECT count(*) FROM versions WHERE machine = ?")?
            .query_row([machine], |r| r.get(0))
    }

    /// Publishes the next version number of a machine from one of its revisions.
    pub fn insert_version(
        &self,
        machine: i64,
        definition: i64,
        description: Option<&str>,
        now_ms: i64,
    ) -> Result<VersionRow> {
        self.conn
            .prepare_cached(
                "UPDATE state_machines SET last_version = last_version + 1 WHERE id = ?",
            )?
            .execute([machine])?;
        let number: u32 = self
            .conn
            .prepare_cached("SELECT last_version FROM state_machines WHERE id = ?")?
            .query_row([machine], |r| r.get(0))?;
        self.conn
            .prepare_cached(
                "INSERT INTO versions (machine, number, definition, description, created_ms) \
                 VALUES (?, ?, ?, ?, ?)",
            )?
            .execute(params![machine, number, definition, description, now_ms])?;
        Ok(VersionRow {
            number,
            definition,
            description: description.map(str::to_owned),
            created_ms: now_ms,
        })
    }

    pub fn delete_version(&self, machine: i64, number: u32) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM versions WHERE machine = ? AND number = ?")?
            .execute(params![machine, number])?;
        Ok(())
    }

    pub fn activity_created(&self, arn: &str) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT created_ms FROM activities WHERE arn = ?")?
            .query_row([arn], |r| r.get(0))
            .optional()
    }

    pub fn insert_activity(&self, arn: &str, name: &str, created_ms: i64) -> Result<()> {
        self.conn
            .prepare_cached("INSERT INTO activities (arn, name, created_ms) VALUES (?, ?, ?)")?
            .execute(params![arn, name, created_ms])?;
        Ok(())
    }

    pub fn activity_arns(&self) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare("SELECT arn FROM activities")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect()
    }
}

//! The `state_machines` and `activities` tables: what `CreateStateMachine` and `CreateActivity`
//! store, read back by ARN.

use super::{Result, Store};
use rusqlite::{OptionalExtension, params};

#[derive(Debug, Clone)]
pub struct StateMachineRow {
    pub arn: String,
    pub name: String,
    pub definition: String,
    pub role_arn: String,
    pub created_ms: i64,
}

impl Store {
    pub fn state_machine(&self, arn: &str) -> Result<Option<StateMachineRow>> {
        self.conn
            .prepare_cached(
                "SELECT arn, name, definition, role_arn, created_ms FROM state_machines WHERE arn = ?",
            )?
            .query_row([arn], |r| {
                Ok(StateMachineRow {
                    arn: r.get(0)?,
                    name: r.get(1)?,
                    definition: r.get(2)?,
                    role_arn: r.get(3)?,
                    created_ms: r.get(4)?,
                })
            })
            .optional()
    }

    pub fn insert_state_machine(&self, row: &StateMachineRow) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO state_machines (arn, name, definition, role_arn, created_ms) VALUES (?, ?, ?, ?, ?)",
            )?
            .execute(params![row.arn, row.name, row.definition, row.role_arn, row.created_ms])?;
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

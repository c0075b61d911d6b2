//! The store's schema: versioned, forward-only migrations embedded in the
//! library and applied when a store opens (docs/store.md lists them). Each
//! backend has its own copy of a version whose SQL differs between them
//! (types: BLOB/BYTEA); a version both run alike is one file beside them.

use std::borrow::Cow;

use sqlx::SqlSafeStr as _;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// The database a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

/// Every migration of `backend`, oldest first: (version, what, SQL).
fn migrations(backend: Backend) -> &'static [(i64, &'static str, &'static str)] {
    match backend {
        Backend::Sqlite => &[
            (
                1,
                "calls, events, retained outputs, saved answers",
                include_str!("migrations/sqlite/0001_store.sql"),
            ),
            (
                2,
                "the caller of each call and event",
                include_str!("migrations/sqlite/0002_callers.sql"),
            ),
            (
                3,
                "outcomes alone in the listing indexes",
                include_str!("migrations/0003_partial_indexes.sql"),
            ),
            (
                4,
                "no listing indexes the planner cannot use",
                include_str!("migrations/sqlite/0004_unused_listing_indexes.sql"),
            ),
            (
                5,
                "a digest of each call's input, so reused ids are refused",
                include_str!("migrations/0005_input_digests.sql"),
            ),
        ],
        Backend::Postgres => &[
            (
                1,
                "calls, events, retained outputs, saved answers",
                include_str!("migrations/postgres/0001_store.sql"),
            ),
            (
                2,
                "the caller of each call and event",
                include_str!("migrations/postgres/0002_callers.sql"),
            ),
            (
                3,
                "outcomes alone in the listing indexes",
                include_str!("migrations/0003_partial_indexes.sql"),
            ),
            (
                5,
                "a digest of each call's input, so reused ids are refused",
                include_str!("migrations/0005_input_digests.sql"),
            ),
        ],
    }
}

/// The migrator of `backend`'s schema.
pub(crate) fn migrator(backend: Backend) -> Migrator {
    let migrations = migrations(backend)
        .iter()
        .map(|&(version, what, sql)| {
            Migration::new(
                version,
                Cow::Borrowed(what),
                MigrationType::Simple,
                sql.into_sql_str(),
                false,
            )
        })
        .collect();
    Migrator::with_migrations(migrations)
}

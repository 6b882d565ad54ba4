//! What the tests that count store calls share: the two stores they count on, a counting
//! wrapper over a fresh one, and a macro that runs each test on both.

use crate::service::testing::store;
use crate::storage::azure::AzureTables;
use crate::storage::faults::FaultyTables;
use crate::store::schema::Schema;

/// Which store a test counts on.
pub(super) enum Backend {
    Embedded,
    /// Azurite, by its connection string.
    Azurite(String),
}

impl Backend {
    /// Azurite, when the backend matrix's rule runs it (`storage::matrix::azurite_account`).
    pub(super) fn azurite() -> Option<Backend> {
        crate::storage::matrix::azurite_account().map(Backend::Azurite)
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Embedded => "Embedded",
            Backend::Azurite(_) => "Azurite",
        })
    }
}

/// The counting wrapper over a fresh store of `backend`, and table names with a fresh prefix
/// starting with `tag`.
pub(super) fn counting(backend: &Backend, tag: &str) -> (FaultyTables, Schema) {
    let tables = match backend {
        Backend::Embedded => FaultyTables::new(store()),
        Backend::Azurite(account) => {
            FaultyTables::new(AzureTables::from_connection_string(account).expect("the Azurite account"))
        }
    };
    let prefix = format!("{tag}{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    (tables, Schema::with_prefix(&prefix).unwrap())
}

/// Runs each named test on both stores through the one backend matrix.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        crate::storage::backend_matrix!(
            embedded: crate::service::tests::counting::Backend::Embedded,
            azurite: crate::service::tests::counting::Backend::azurite();
            $($name),*
        );
    };
}

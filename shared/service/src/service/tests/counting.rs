//! What the tests that count store calls share: the two stores they count on, a counting
//! wrapper over a fresh one, and a macro that runs each test on both.

use crate::service::testing::store;
use crate::storage::azure::AzureTables;
use crate::storage::faults::FaultyTables;
use crate::store::schema::Schema;

/// Which store a test counts on.
#[derive(Debug, Clone, Copy)]
pub(super) enum Backend {
    Embedded,
    Azurite,
}

/// The counting wrapper over a fresh store of `backend`, and table names with a fresh prefix
/// starting with `tag`.
pub(super) fn counting(backend: Backend, tag: &str) -> (FaultyTables, Schema) {
    let tables = match backend {
        Backend::Embedded => FaultyTables::new(store()),
        Backend::Azurite => {
            let account =
                std::env::var("TABLETALK_TEST_AZURITE").unwrap_or_else(|_| "UseDevelopmentStorage=true".into());
            FaultyTables::new(AzureTables::from_connection_string(&account).expect("the Azurite account"))
        }
    };
    let prefix = format!("{tag}{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    (tables, Schema::with_prefix(&prefix).unwrap())
}

/// `mod embedded` and `mod azurite`, each with a test per name calling `name(Backend::…)`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Embedded).await
                }
            )*
        }
        mod azurite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::Backend::Azurite).await
                }
            )*
        }
    };
}

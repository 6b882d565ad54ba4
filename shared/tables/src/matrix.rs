//! The backend matrix every test suite uses: [`backend_matrix!`] runs each named test once on
//! the embedded store and once on Azurite, as `embedded::<name>` and `azurite::<name>`, and
//! [`azurite_account`] is the one rule for when an Azurite test runs: always under `CI` (an
//! unreachable Azurite fails the test there), and outside CI only when Azurite answers.

use std::net::TcpStream;
use std::time::Duration;

/// The connection string of the Azurite the tests use (`TABLETALK_TEST_AZURITE`, else the
/// development account), or `None` when it does not answer outside CI. Under `CI` an
/// unreachable Azurite panics: the Azurite tests never skip there.
pub fn azurite_account() -> Option<String> {
    let account = std::env::var("TABLETALK_TEST_AZURITE").unwrap_or_else(|_| "UseDevelopmentStorage=true".to_owned());
    let port = account
        .split(';')
        .find_map(|part| part.strip_prefix("TableEndpoint="))
        .and_then(|url| url.split(':').nth(2))
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(10002);
    if TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)).is_ok() {
        return Some(account);
    }
    if std::env::var_os("CI").is_some() {
        panic!("Azurite is not reachable on port {port} and CI is set: the Azurite tests must run");
    }
    eprintln!(
        "note: Azurite not reachable on port {port}; skipping this Azurite test (start it, or set TABLETALK_TEST_AZURITE)"
    );
    None
}

/// Runs each named `async fn(backend)` of the calling module once per backend, as the tests
/// `embedded::<name>` and `azurite::<name>`, so a failure names the backend it failed on and
/// `cargo test embedded::` runs one half alone. `embedded` is an expression that makes the
/// embedded backend; `azurite` one that makes `Option` of the Azurite backend, `None` only
/// when [`azurite_account`] says so. Both are evaluated inside the async test (they may
/// `.await`) with the calling module's names in scope. A function left out of the list is
/// dead code, which the compiler reports.
#[macro_export]
macro_rules! backend_matrix {
    (embedded: $embedded:expr, azurite: $azurite:expr; $($name:ident),+ $(,)?) => {
        mod embedded {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($embedded).await;
                }
            )+
        }

        mod azurite {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(backend) = $azurite {
                        super::$name(backend).await;
                    }
                }
            )+
        }
    };
}

//! `tabletalk package`: the deployable Functions app zip — the binary (with its run bit, named
//! as `host.json` starts it), `host.json`, and one `<FunctionName>/function.json` for every
//! function the router serves (HTTP and trigger), nothing else. Run through the `cargo
//! package-app` alias, which builds the Linux release binary first and packages that binary
//! itself.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use zip::ZipWriter;
use zip::write::SimpleFileOptions;

use crate::http::function_table::http_functions;
use crate::http::triggers::TRIGGER_FUNCTIONS;

/// The executable's name inside the package (`host.json`'s `defaultExecutablePath`).
pub const EXECUTABLE: &str = "tabletalk";
/// Every function folder the package holds: the router's HTTP functions (read off its
/// OpenAPI document, `function_table`) and its trigger functions.
pub fn function_names() -> Vec<String> {
    http_functions()
        .into_iter()
        .map(|f| f.name)
        .chain(TRIGGER_FUNCTIONS.iter().map(|f| f.name.to_owned()))
        .collect()
}

/// Checks a `function.json` against what the router serves under `name`: an HTTP function's
/// methods, route and `authLevel` (one trigger, one output, as HTTP forwarding needs), or a
/// trigger function's exact binding. A package never ships a definition that drifted from the code.
pub fn check_definition(name: &str, definition: &[u8]) -> Result<(), String> {
    let drifted = |why: &str| format!("{name}/function.json {why}");
    let doc: serde_json::Value = serde_json::from_slice(definition).map_err(|_| drifted("is not JSON"))?;
    let bindings = doc["bindings"].as_array().ok_or_else(|| drifted("has no bindings"))?;
    if let Some(function) = http_functions().into_iter().find(|f| f.name == name) {
        let methods = function.methods;
        let declared: Vec<&str> = bindings
            .first()
            .and_then(|b| b["methods"].as_array())
            .map(|m| m.iter().filter_map(|m| m.as_str()).collect())
            .unwrap_or_default();
        let [trigger, output] = bindings.as_slice() else {
            return Err(drifted("is not one httpTrigger and one http output"));
        };
        let auth_level = function.auth_level.as_str();
        return match (
            trigger["type"] == "httpTrigger" && output["type"] == "http",
            declared == methods,
        ) {
            (false, _) => Err(drifted("is not one httpTrigger and one http output")),
            (_, false) => Err(drifted(&format!(
                "declares methods {declared:?}, the router {methods:?}"
            ))),
            _ if trigger["route"] != function.route => {
                Err(drifted(&format!("does not declare route {}", function.route)))
            }
            _ if trigger["authLevel"] != auth_level => Err(drifted(&format!("must have authLevel {auth_level}"))),
            _ => Ok(()),
        };
    }
    let function = TRIGGER_FUNCTIONS
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| drifted("belongs to no function the router serves"))?;
    let binding: serde_json::Value = serde_json::from_str(function.binding).map_err(|e| e.to_string())?;
    match bindings.as_slice() {
        [only] if *only == binding => Ok(()),
        _ => Err(drifted(&format!("is not exactly the binding {binding}"))),
    }
}

/// Refuses anything the Functions host (x86-64 Linux) cannot run: an ELF executable for
/// x86-64 only.
pub fn check_executable(binary: &[u8]) -> Result<(), String> {
    const ELF: &[u8] = b"\x7fELF";
    const X86_64: u16 = 0x3e;
    let machine = binary.get(18..20).map(|m| u16::from_le_bytes([m[0], m[1]]));
    match (binary.starts_with(ELF), machine) {
        (true, Some(X86_64)) => Ok(()),
        _ => Err("the binary is not an x86-64 Linux executable; build the package on x86-64 Linux".into()),
    }
}

/// `host.json` must start the executable the package holds, through a custom handler.
fn check_host(host: &[u8]) -> Result<(), String> {
    let host: serde_json::Value = serde_json::from_slice(host).map_err(|_| "host.json is not JSON".to_owned())?;
    let path = &host["customHandler"]["description"]["defaultExecutablePath"];
    if path != EXECUTABLE {
        return Err(format!("host.json starts {path}, the package holds {EXECUTABLE:?}"));
    }
    Ok(())
}

/// Writes the zip of `binary` and the app in `app_dir` (the `functions/` folder) to `out`.
pub fn package(binary: &Path, app_dir: &Path, out: &Path) -> Result<(), String> {
    let read = |path: PathBuf| std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()));
    let executable = read(binary.to_path_buf())?;
    check_executable(&executable)?;
    let host = read(app_dir.join("host.json"))?;
    check_host(&host)?;
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let file = File::create(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut zip = ZipWriter::new(file);
    let mut add = |name: &str, bytes: Vec<u8>, mode: u32| -> Result<(), String> {
        let options = SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(mode);
        zip.start_file(name, options)
            .and_then(|()| zip.write_all(&bytes).map_err(Into::into))
            .map_err(|e| format!("writing {name} into the zip: {e}"))
    };
    add(EXECUTABLE, executable, 0o755)?;
    add("host.json", host, 0o644)?;
    for name in function_names() {
        let definition = read(app_dir.join(&name).join("function.json"))?;
        check_definition(&name, &definition)?;
        add(&format!("{name}/function.json"), definition, 0o644)?;
    }
    zip.finish().map_err(|e| format!("finishing the zip: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::io::Read;

    use super::*;

    /// The zip holds the binary with its run bit, host.json and exactly one function.json per
    /// routed function, each the same as the repository's.
    #[test]
    fn the_package_holds_exactly_the_app() {
        let app_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = std::env::temp_dir().join(format!("tt-package-{}", uuid::Uuid::new_v4()));
        let binary = dir.join("binary");
        std::fs::create_dir_all(&dir).unwrap();
        // An ELF header for x86-64 is all the package looks at.
        let mut elf = b"\x7fELF\x02\x01\x01".to_vec();
        elf.resize(18, 0);
        elf.extend_from_slice(&0x3e_u16.to_le_bytes());
        std::fs::write(&binary, &elf).unwrap();
        let out = dir.join("app.zip");
        package(&binary, app_dir, &out).unwrap();

        let mut zip = zip::ZipArchive::new(File::open(&out).unwrap()).unwrap();
        let names: BTreeSet<String> = zip.file_names().map(|name| name.unwrap().into_owned()).collect();
        let mut expected: BTreeSet<String> = function_names()
            .iter()
            .map(|name| format!("{name}/function.json"))
            .collect();
        expected.insert(EXECUTABLE.into());
        expected.insert("host.json".into());
        assert_eq!(names, expected);
        let executable = zip.by_name(EXECUTABLE).unwrap();
        assert_eq!(executable.unix_mode().unwrap() & 0o777, 0o755);
        drop(executable);
        let mut notify = String::new();
        zip.by_name("notify/function.json")
            .unwrap()
            .read_to_string(&mut notify)
            .unwrap();
        assert_eq!(
            notify,
            std::fs::read_to_string(app_dir.join("notify/function.json")).unwrap()
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A hand-edited definition with the wrong shape is refused with a reason, never a panic.
    #[test]
    fn a_definition_without_its_two_bindings_is_refused() {
        for bindings in [r#"{"bindings": []}"#, r#"{"bindings": [{"type": "httpTrigger"}]}"#] {
            let refused = check_definition("createRoom", bindings.as_bytes()).unwrap_err();
            assert!(refused.contains("one httpTrigger and one http output"), "{refused}");
        }
    }

    #[test]
    fn only_an_x86_64_linux_executable_is_packaged() {
        assert!(check_executable(&std::fs::read(std::env::current_exe().unwrap()).unwrap()).is_ok());
        let mut arm = b"\x7fELF\x02\x01\x01".to_vec();
        arm.resize(18, 0);
        arm.extend_from_slice(&0xb7_u16.to_le_bytes());
        for other in [&b"\xcf\xfa\xed\xfe mach-o"[..], b"MZ windows", &arm, b""] {
            assert!(check_executable(other).is_err());
        }
        assert!(check_host(br#"{"customHandler":{"description":{"defaultExecutablePath":"other"}}}"#).is_err());
    }
}

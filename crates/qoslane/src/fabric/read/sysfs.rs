//! HCA ports from sysfs: `<root>/sys/class/infiniband/<dev>/ports/<n>/`.
//!
//! Only files every RDMA driver has are read (`state`, `phys_state`,
//! `link_layer`, `lid`, `sm_lid`, `sm_sl`, `rate`, the device's `node_guid`).
//! sysfs has no SL2VL table or OperVLs for mlx5: those need SMP queries.
//!
//! Format quirks seen on real trees (modelled in `tests/fixtures/fabric/`):
//! mlx5 may print `4: ACTIVE` in `phys_state`, `node_guid` may lack its
//! newline, `link_layer` may carry a trailing blank line. `state` is the one
//! that decides whether a port is ACTIVE.

use std::cell::RefCell;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fabric::tables::{PortId, PortIdentity};
use crate::mapping::DeviceSelector;
use crate::paths::Paths;

/// `link_layer`: InfiniBand ports have SL2VL tables; Ethernet (RoCE) ports
/// carry priorities from the traffic class instead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
    /// The kernel's `Unknown` (or a value this version does not know).
    Other(String),
}

impl fmt::Display for LinkLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InfiniBand => f.write_str("InfiniBand"),
            Self::Ethernet => f.write_str("Ethernet"),
            Self::Other(s) => f.write_str(s),
        }
    }
}

/// One port as sysfs shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SysfsPort {
    pub id: PortId,
    pub link_layer: LinkLayer,
    /// `state` as read, e.g. `4: ACTIVE`.
    pub state: String,
    /// `phys_state` as read, e.g. `5: LinkUp`.
    pub phys_state: String,
    pub active: bool,
    /// Read for ACTIVE InfiniBand ports only.
    pub identity: Option<PortIdentity>,
    pub sm_sl: Option<u8>,
    pub rate: Option<String>,
}

/// The ports of this node, split by the mapping's `devices:` filter.
#[derive(Clone, Debug, Default)]
pub struct Discovery {
    /// Selected ports, sorted by device then port number.
    pub ports: Vec<SysfsPort>,
    /// Ports present but not selected by `devices:`.
    pub unselected: Vec<PortId>,
    /// `devices:` entries that match no port on this node.
    pub unmatched: Vec<String>,
}

/// Walks `<root>/sys/class/infiniband`. A missing directory is a node
/// without RDMA devices (zero ports), not an error. A port whose files say
/// it is gone ([`nodeio::Absence`]: removed, or its device unregistered by an
/// HCA reset or a driver reload) is not there, as if its directory had
/// vanished first: a listed one is then `unmatched`.
///
/// While a run's [`PortsRemembered`] guard lives (the run's session), the ports
/// are read once per `devices:` filter: a Prolog's fabric check and its
/// counters, or a health run's checks and its counters, take the same
/// reading, made milliseconds apart.
pub fn discover(paths: &Paths, selectors: &[DeviceSelector]) -> Result<Discovery> {
    let class = paths.sysfs_ib();
    let known = RUN.with_borrow(|(guards, last)| {
        last.as_ref()
            .filter(|(c, s, _)| *guards > 0 && *c == class && s == selectors)
            .map(|(_, _, d)| d.clone())
    });
    if let Some(d) = known {
        return Ok(d);
    }
    let found = read_ports(paths, selectors)?;
    RUN.with_borrow_mut(|(guards, last)| {
        if *guards > 0 {
            *last = Some((class, selectors.to_vec(), found.clone()));
        }
    });
    Ok(found)
}

thread_local! {
    /// The guards of this thread alive, and its last reading: the sysfs
    /// directory, the `devices:` filter, what was found.
    static RUN: RefCell<(usize, LastReading)> = const { RefCell::new((0, None)) };
}

type LastReading = Option<(PathBuf, Vec<DeviceSelector>, Discovery)>;

/// While it lives, [`discover`] reads the ports once per filter (on the
/// thread that holds it). One run's: a long-lived process must not keep one.
#[derive(Debug)]
pub struct PortsRemembered(std::marker::PhantomData<*const ()>);

/// See [`PortsRemembered`].
pub fn remember_for_run() -> PortsRemembered {
    RUN.with_borrow_mut(|(guards, _)| *guards += 1);
    PortsRemembered(std::marker::PhantomData)
}

impl Drop for PortsRemembered {
    fn drop(&mut self) {
        RUN.with_borrow_mut(|(guards, last)| {
            *guards = guards.saturating_sub(1);
            if *guards == 0 {
                *last = None;
            }
        });
    }
}

fn read_ports(paths: &Paths, selectors: &[DeviceSelector]) -> Result<Discovery> {
    let class = paths.sysfs_ib();
    let mut out = Discovery::default();
    let mut devices = match fs::read_dir(&class) {
        Ok(rd) => rd
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<io::Result<Vec<_>>>()
            .map_err(Error::io("list", &class))?,
        Err(e) if is_gone(&e) => Vec::new(),
        Err(e) => return Err(Error::io("list", &class)(e)),
    };
    devices.sort();
    for dev in &devices {
        let ports_dir = class.join(dev).join("ports");
        for n in port_numbers(paths, &ports_dir)? {
            let id = PortId::new(dev.as_str(), n);
            if !selectors.is_empty() && !selectors.iter().any(|s| s.matches(dev, n)) {
                out.unselected.push(id);
                continue;
            }
            match read_port(paths, &class, id) {
                Ok(port) => out.ports.push(port),
                Err(PortUnread::Gone) => {}
                Err(PortUnread::Failed(e)) => return Err(e),
            }
        }
    }
    out.unmatched = selectors
        .iter()
        .filter(|s| !out.ports.iter().any(|p| s.matches(&p.id.device, p.id.port)))
        .map(ToString::to_string)
        .collect();
    Ok(out)
}

fn port_numbers(paths: &Paths, dir: &Path) -> Result<Vec<u32>> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        // A device without ports/ (none seen, but not ours to judge) has
        // none; nor has one gone under our feet.
        Err(e) if is_gone(&e) => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", dir)(e)),
    };
    let mut ports = Vec::new();
    for entry in rd {
        let entry = entry.map_err(Error::io("list", dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let n = name.parse::<u32>().map_err(|_| {
            Error::Fabric(format!(
                "{}: `{name}` is not a port number",
                paths.display(dir)
            ))
        })?;
        ports.push(n);
    }
    ports.sort_unstable();
    Ok(ports)
}

/// A sysfs attribute's text: open, one `read` (the kernel gives an
/// attribute whole in one read: `nodeio::trusted::read_sized`), close — no
/// `statx` for a size sysfs does not know, no second read for the end. A
/// read that fills the buffer (not one of the short attributes read here)
/// is read on to the end.
fn read_attribute(p: &Path) -> io::Result<String> {
    let f = fs::File::open(p)?;
    let buf = nodeio::trusted::read_sized(&f, ATTRIBUTE_READ as u64 - 1, u64::MAX)?;
    String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// What the one read of an attribute asks for: more than any attribute
/// read here holds (a GUID, a state, a rate: a few dozen bytes).
const ATTRIBUTE_READ: usize = 256;

/// Whether the node has `ib_umad` loaded: its ABI file under the root
/// prefix's sysfs (`sys/class/infiniband_mad/abi_version`, which the kernel
/// shows while the module is loaded). Without it no port opens in process:
/// libibumad is not loaded to find that out (the loader's work, and its
/// `ibwarn` on stderr, at every hook of such a node).
pub fn umad_loaded(paths: &Paths) -> bool {
    let abi = paths
        .sysfs_ib()
        .with_file_name("infiniband_mad")
        .join("abi_version");
    fs::symlink_metadata(abi).is_ok()
}

/// Why a port was not read: it is gone, or reading failed.
enum PortUnread {
    Gone,
    Failed(Error),
}

impl From<Error> for PortUnread {
    fn from(e: Error) -> Self {
        Self::Failed(e)
    }
}

/// Whether an error of a sysfs read says the file or its device is gone.
fn is_gone(e: &io::Error) -> bool {
    nodeio::Absence::of_io(e).is_some()
}

fn read_port(paths: &Paths, class: &Path, id: PortId) -> Result<SysfsPort, PortUnread> {
    let dir = class
        .join(&id.device)
        .join("ports")
        .join(id.port.to_string());
    let f = SysFile { paths, dir: &dir };
    let link_layer = match f.read_opt("link_layer")? {
        // Kernels before link_layer existed had InfiniBand only.
        None => LinkLayer::InfiniBand,
        Some(s) => match s.as_str() {
            "InfiniBand" => LinkLayer::InfiniBand,
            "Ethernet" => LinkLayer::Ethernet,
            _ => LinkLayer::Other(s),
        },
    };
    let state = f.read("state")?;
    let state_code = f.parse(&state, "state", "`N: NAME`", parse_numbered)?;
    let phys_state = f.read("phys_state")?;
    f.parse(&phys_state, "phys_state", "`N: NAME`", parse_numbered)?;
    let active = state_code == (4, "ACTIVE");
    let mut port = SysfsPort {
        id,
        link_layer,
        state,
        phys_state,
        active,
        identity: None,
        sm_sl: None,
        rate: None,
    };
    if active && port.link_layer == LinkLayer::InfiniBand {
        let dev_dir = class.join(&port.id.device);
        let guid_file = SysFile {
            paths,
            dir: &dev_dir,
        };
        let guid = guid_file.read("node_guid")?;
        let node_guid = guid_file.parse(&guid, "node_guid", "`xxxx:xxxx:xxxx:xxxx`", parse_guid)?;
        let lid = f.read("lid")?;
        let sm_lid = f.read("sm_lid")?;
        let sm_sl = f.read("sm_sl")?;
        port.identity = Some(PortIdentity {
            node_guid: format!("0x{node_guid:016x}"),
            lid: f.parse(&lid, "lid", "a hex LID like `0x4`", parse_hex_u16)?,
            sm_lid: f.parse(&sm_lid, "sm_lid", "a hex LID like `0x1`", parse_hex_u16)?,
        });
        port.sm_sl = Some(f.parse(&sm_sl, "sm_sl", "an SL 0..=15", |s| {
            s.parse::<u8>().ok().filter(|&v| v <= 15)
        })?);
        port.rate = f.read_opt("rate")?;
    } else if active {
        port.rate = f.read_opt("rate")?;
    }
    Ok(port)
}

/// Which of `ports` are not ACTIVE now, one line each (`mlx5_0/1: state 1:
/// DOWN`); a port whose directory is gone says so.
pub fn not_active(paths: &Paths, ports: &[PortId]) -> Result<Vec<String>> {
    let class = paths.sysfs_ib();
    let mut out = Vec::new();
    for id in ports {
        let dir = class
            .join(&id.device)
            .join("ports")
            .join(id.port.to_string());
        let f = SysFile { paths, dir: &dir };
        match f.read_opt("state") {
            Ok(None) => out.push(format!(
                "{id}: port is gone (no {})",
                paths.display(&dir.join("state"))
            )),
            Err(PortUnread::Gone) => out.push(format!(
                "{id}: port is gone (its device is: {} answers ENODEV or ENXIO)",
                paths.display(&dir.join("state"))
            )),
            Err(PortUnread::Failed(e)) => return Err(e),
            Ok(Some(state)) => {
                let code = f.parse(&state, "state", "`N: NAME`", parse_numbered)?;
                if code != (4, "ACTIVE") {
                    out.push(format!("{id}: state {state}, not 4: ACTIVE"));
                }
            }
        }
    }
    Ok(out)
}

/// A sysfs directory; every error names the file, every parse error quotes
/// the content.
struct SysFile<'a> {
    paths: &'a Paths,
    dir: &'a Path,
}

impl SysFile<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The content without surrounding whitespace (sysfs ends in `\n`; some
    /// drivers add blank lines or omit the newline); a file every port has:
    /// missing while its port's directory is listed, an error; its device
    /// gone, the port gone.
    fn read(&self, name: &str) -> Result<String, PortUnread> {
        let p = self.path(name);
        match read_attribute(&p) {
            Ok(s) => Ok(s.trim().to_owned()),
            Err(e) if nodeio::Absence::of_io(&e) == Some(nodeio::Absence::Device) => {
                Err(PortUnread::Gone)
            }
            Err(e) => Err(Error::io("read", p)(e).into()),
        }
    }

    /// A file some kernels or drivers lack: `None` when it was never there;
    /// its device gone is the port gone.
    fn read_opt(&self, name: &str) -> Result<Option<String>, PortUnread> {
        let p = self.path(name);
        match read_attribute(&p) {
            Ok(s) => Ok(Some(s.trim().to_owned())),
            Err(e) => match nodeio::Absence::of_io(&e) {
                Some(nodeio::Absence::File) => Ok(None),
                Some(nodeio::Absence::Device) => Err(PortUnread::Gone),
                None => Err(Error::io("read", p)(e).into()),
            },
        }
    }

    fn parse<'s, T>(
        &self,
        content: &'s str,
        name: &str,
        expected: &str,
        f: impl FnOnce(&'s str) -> Option<T>,
    ) -> Result<T> {
        f(content).ok_or_else(|| {
            Error::Fabric(format!(
                "parse {}: expected {expected}, found {content:?}",
                self.paths.display(&self.path(name))
            ))
        })
    }
}

/// `4: ACTIVE` → (4, "ACTIVE").
fn parse_numbered(s: &str) -> Option<(u8, &str)> {
    let (n, name) = s.split_once(": ")?;
    let n = n.parse().ok()?;
    (!name.is_empty() && !name.contains('\n')).then_some((n, name))
}

/// `0002:c903:00a2:0b30` → 0x0002c90300a20b30.
fn parse_guid(s: &str) -> Option<u64> {
    let groups: Vec<&str> = s.split(':').collect();
    if groups.len() != 4
        || !groups
            .iter()
            .all(|g| g.len() == 4 && g.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return None;
    }
    u64::from_str_radix(&groups.concat(), 16).ok()
}

fn parse_hex_u16(s: &str) -> Option<u16> {
    let hex = s.strip_prefix("0x")?;
    if hex.is_empty() || hex.len() > 4 {
        return None;
    }
    u16::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_states_parse_strictly() {
        assert_eq!(parse_numbered("4: ACTIVE"), Some((4, "ACTIVE")));
        assert_eq!(parse_numbered("5: LinkUp"), Some((5, "LinkUp")));
        assert_eq!(parse_numbered("ACTIVE"), None);
        assert_eq!(parse_numbered("4:ACTIVE"), None);
        assert_eq!(parse_numbered("x: ACTIVE"), None);
        assert_eq!(parse_numbered("4: "), None);
    }

    #[test]
    fn guids_are_four_groups_of_four_hex_digits() {
        assert_eq!(
            parse_guid("0002:c903:00a2:0b30"),
            Some(0x0002_c903_00a2_0b30)
        );
        assert_eq!(
            parse_guid("0a7f:bc12:45ef:d23b"),
            Some(0x0a7f_bc12_45ef_d23b)
        );
        assert_eq!(parse_guid("0x0002c90300a20b30"), None);
        assert_eq!(parse_guid("0002:c903:00a2"), None);
        assert_eq!(parse_guid("0002:c903:00a2:0b3g"), None);
    }

    #[test]
    fn lids_are_hex() {
        assert_eq!(parse_hex_u16("0x4"), Some(4));
        assert_eq!(parse_hex_u16("0xc001"), Some(0xc001));
        assert_eq!(parse_hex_u16("4"), None);
        assert_eq!(parse_hex_u16("0x"), None);
        assert_eq!(parse_hex_u16("0x10000"), None);
    }

    /// An attribute is read whole in one read of a page (with or without
    /// its newline); a longer file is read on to its end; a file that is
    /// not text is an error, as `read_to_string`'s.
    #[test]
    fn an_attribute_is_read_whole() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let f = tmp.path().join("attr");
        fs::write(&f, "0a7f:bc12:45ef:d23b").expect("write");
        assert_eq!(read_attribute(&f).expect("read"), "0a7f:bc12:45ef:d23b");
        let long = "x".repeat(ATTRIBUTE_READ * 2 + 3);
        fs::write(&f, &long).expect("write");
        assert_eq!(read_attribute(&f).expect("read"), long);
        fs::write(&f, "y".repeat(ATTRIBUTE_READ)).expect("write");
        assert_eq!(read_attribute(&f).expect("read").len(), ATTRIBUTE_READ);
        fs::write(&f, [0xff, 0xfe]).expect("write");
        assert_eq!(
            read_attribute(&f).map_err(|e| e.kind()).unwrap_err(),
            io::ErrorKind::InvalidData
        );
    }

    /// `ib_umad` is there when its ABI file is, under the root prefix.
    #[test]
    fn umad_is_loaded_where_its_abi_file_is() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let paths = Paths::new(crate::paths::Overrides {
            root: Some(tmp.path().to_path_buf()),
            ..Default::default()
        });
        assert!(!umad_loaded(&paths));
        let mad = tmp.path().join("sys/class/infiniband_mad");
        fs::create_dir_all(&mad).expect("mkdir");
        fs::write(mad.join("abi_version"), "5\n").expect("write");
        assert!(umad_loaded(&paths));
    }

    /// While a run's guard lives, the ports are read once per filter (a
    /// port's LID changed meanwhile is not seen until the guard goes);
    /// without one, every call reads them.
    #[test]
    fn a_run_reads_the_ports_once_while_its_guard_lives() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dev = tmp.path().join("sys/class/infiniband/mlx5_0");
        let port = dev.join("ports/1");
        fs::create_dir_all(&port).expect("mkdir");
        fs::write(dev.join("node_guid"), "0002:c903:00a2:0b30\n").expect("write");
        for (f, v) in [
            ("state", "4: ACTIVE\n"),
            ("phys_state", "5: LinkUp\n"),
            ("link_layer", "InfiniBand\n"),
            ("lid", "0x7\n"),
            ("sm_lid", "0x1\n"),
            ("sm_sl", "0\n"),
            ("rate", "100 Gb/sec (4X EDR)\n"),
        ] {
            fs::write(port.join(f), v).expect("write");
        }
        let paths = Paths::new(crate::paths::Overrides {
            root: Some(tmp.path().to_owned()),
            ..crate::paths::Overrides::default()
        });
        let lid = |d: &Discovery| d.ports[0].identity.as_ref().map(|i| i.lid);
        {
            let _run = remember_for_run();
            assert_eq!(lid(&discover(&paths, &[]).expect("ports")), Some(7));
            fs::write(port.join("lid"), "0x9\n").expect("write");
            assert_eq!(
                lid(&discover(&paths, &[]).expect("ports")),
                Some(7),
                "the run's one reading"
            );
        }
        assert_eq!(lid(&discover(&paths, &[]).expect("ports")), Some(9));
        assert_eq!(lid(&discover(&paths, &[]).expect("ports")), Some(9));
    }
}

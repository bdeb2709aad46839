//! libibumad, loaded at run time: the one module with `unsafe` in qoslane.
//! An HCA port opened for MADs (an agent per management class, registered
//! at open for the classes the caller names, else at its first MAD), a MAD
//! sent, a MAD received within a wait. Nothing else: what to send and
//! what the answers mean are [`super::mad`]'s and [`super::smp_batch`]'s.
//!
//! Loaded by `dlopen` (`libibumad.so.3`), so a host without it still runs
//! (the audit falls back to `smpquery`); through libibumad rather than the
//! kernel's `/dev/infiniband/umadN` directly, so every call goes through
//! libc as `smpquery`'s do and the simulator's preload (`libumad2sim.so`)
//! serves it alike.

#![expect(
    unsafe_code,
    reason = "calling a C library loaded at run time; each call states its contract"
)]

use std::ffi::{CStr, CString, c_char, c_int, c_long, c_void};
use std::fmt;

use crate::fabric::read::mad::{
    CLASS_DIRECTED, CLASS_LID_ROUTED, CLASS_PERF, CLASS_SA, MAD_SIZE, QP1_QKEY,
};
use crate::fabric::tables::PortId;

/// The library's file name (its ABI since rdma-core 13).
pub const LIBRARY: &str = "libibumad.so.3";

type InitFn = unsafe extern "C" fn() -> c_int;
type OpenPortFn = unsafe extern "C" fn(*const c_char, c_int) -> c_int;
type ClosePortFn = unsafe extern "C" fn(c_int) -> c_int;
type RegisterFn = unsafe extern "C" fn(c_int, c_int, c_int, u8, *mut c_long) -> c_int;
type SizeFn = unsafe extern "C" fn() -> usize;
type GetMadFn = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type SetAddrFn = unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, c_int) -> c_int;
type SendFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, c_int, c_int, c_int) -> c_int;
type RecvFn = unsafe extern "C" fn(c_int, *mut c_void, *mut c_int, c_int) -> c_int;
type StatusFn = unsafe extern "C" fn(*mut c_void) -> c_int;

struct Fns {
    register: RegisterFn,
    close_port: ClosePortFn,
    get_mad: GetMadFn,
    set_addr: SetAddrFn,
    send: SendFn,
    recv: RecvFn,
    status: StatusFn,
}

/// An HCA port open for MADs.
pub struct Umad {
    lib: *mut c_void,
    f: Fns,
    port: c_int,
    /// The agents of the LID-routed and the directed-route SMP classes and
    /// of Performance Management and Subnet Administration (GMPs), in
    /// [`CLASSES`]' order: registered when first needed ([`NOT_YET`] until
    /// then; a negative errno when it could not register). A port opened
    /// for its own counters registers the PMA's agent alone: each agent is a
    /// kernel object made at registration and flushed at close.
    agents: [c_int; 4],
    /// A `struct ib_user_mad` and a MAD to send, 8-byte aligned as its
    /// header wants: zeroed once; each send writes the MAD, the address
    /// and the send fields, nothing else of the header is ever set.
    send_buf: Vec<u64>,
    /// The same, for the MAD received.
    recv_buf: Vec<u64>,
}

impl fmt::Debug for Umad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Umad")
            .field("port", &self.port)
            .field("agents", &self.agents)
            .finish_non_exhaustive()
    }
}

/// The management classes of [`Umad`]'s agents, in its slots' order, and
/// each one's class version.
const CLASSES: [(u8, u8); 4] = [
    (CLASS_LID_ROUTED, 1),
    (CLASS_DIRECTED, 1),
    (CLASS_PERF, 1),
    (CLASS_SA, 2),
];

/// An agent slot not registered yet.
const NOT_YET: c_int = c_int::MIN;

/// What [`Umad::recv`] got.
#[derive(Debug)]
pub struct Received<'a> {
    /// The kernel's status: 0, or an errno (ETIMEDOUT: the request, back
    /// unanswered).
    pub status: i32,
    /// The MAD, in the port's receive buffer.
    pub mad: &'a [u8],
}

/// A libibumad return value (a negative errno) as words.
fn errno(r: c_int) -> std::io::Error {
    std::io::Error::from_raw_os_error(r.saturating_neg())
}

fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until
    // the next dl* call on this thread; it is copied at once.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "unknown dlopen error".into()
    } else {
        // SAFETY: non-NULL, NUL-terminated (see above).
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// A function of `lib` by name, as type `T` (a function pointer type).
///
/// SAFETY (the caller's): `T` is the C signature of `name` in libibumad 3.
unsafe fn symbol<T: Copy>(lib: *mut c_void, name: &CStr) -> Result<T, String> {
    // SAFETY: lib is a live handle from dlopen; name is NUL-terminated.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    if p.is_null() {
        return Err(format!(
            "{LIBRARY}: no {}: {}",
            name.to_string_lossy(),
            dl_error()
        ));
    }
    // SAFETY: a function pointer is pointer-sized; its signature is the
    // caller's promise.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) })
}

impl Umad {
    /// Loads libibumad and opens `via` (or the first active port of the
    /// first HCA), with the agents of `classes` registered at once (an
    /// error when one cannot be); the other classes' agents are registered
    /// at their first MAD. An error says why in-process reads are not
    /// possible here (no library, no device, no permission).
    pub fn open(via: Option<&PortId>, classes: &[u8]) -> Result<Self, String> {
        let name = CString::new(LIBRARY).map_err(|e| e.to_string())?;
        // SAFETY: dlopen of a library by name; its constructors are
        // libibumad's (none that matter); the handle is closed in Drop.
        let lib = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(format!("cannot load {LIBRARY}: {}", dl_error()));
        }
        match Self::open_with(lib, via, classes) {
            Ok(u) => Ok(u),
            Err(e) => {
                // SAFETY: the handle is live and nothing of it is kept.
                unsafe { libc::dlclose(lib) };
                Err(e)
            }
        }
    }

    fn open_with(lib: *mut c_void, via: Option<&PortId>, classes: &[u8]) -> Result<Self, String> {
        // SAFETY: each type is the function's prototype in umad.h (libibumad 3).
        let (init, open_port, size, f) = unsafe {
            (
                symbol::<InitFn>(lib, c"umad_init")?,
                symbol::<OpenPortFn>(lib, c"umad_open_port")?,
                symbol::<SizeFn>(lib, c"umad_size")?,
                Fns {
                    register: symbol(lib, c"umad_register")?,
                    close_port: symbol(lib, c"umad_close_port")?,
                    get_mad: symbol(lib, c"umad_get_mad")?,
                    set_addr: symbol(lib, c"umad_set_addr")?,
                    send: symbol(lib, c"umad_send")?,
                    recv: symbol(lib, c"umad_recv")?,
                    status: symbol(lib, c"umad_status")?,
                },
            )
        };
        // SAFETY: no arguments; returns < 0 on failure.
        if unsafe { init() } < 0 {
            return Err("umad_init failed".into());
        }
        let ca = via
            .map(|v| CString::new(v.device.as_str()))
            .transpose()
            .map_err(|_| "a device name with a NUL byte".to_owned())?;
        let port_num = via
            .map_or(Ok(0), |v| c_int::try_from(v.port))
            .map_err(|_| "port number out of range".to_owned())?;
        let ca_ptr = ca.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        // SAFETY: ca_ptr is NULL (the default HCA) or a live C string.
        let port = unsafe { open_port(ca_ptr, port_num) };
        let what = via.map_or_else(|| "the default HCA port".to_owned(), ToString::to_string);
        if port < 0 {
            return Err(format!(
                "cannot open {what} for SMPs and PMA Gets: {}",
                errno(port)
            ));
        }
        // SAFETY: no arguments.
        let header = unsafe { size() };
        // From here on, Drop closes the port.
        let mut umad = Self {
            lib,
            f,
            port,
            agents: [NOT_YET; 4],
            send_buf: vec![0; (header + MAD_SIZE).div_ceil(8)],
            recv_buf: vec![0; (header + MAD_SIZE).div_ceil(8)],
        };
        for &class in classes {
            let a = umad.agent(class);
            if a < 0 {
                // The port is closed by Drop; the library stays loaded for
                // the caller's dlclose.
                umad.lib = std::ptr::null_mut();
                return Err(format!(
                    "cannot register an agent of management class {class:#04x} on {what}: {}",
                    errno(a)
                ));
            }
        }
        Ok(umad)
    }

    /// The agent of management `class` (the LID-routed SMP's for a class
    /// not in [`CLASSES`]), registered now when it was not yet: its id, or a
    /// negative errno.
    fn agent(&mut self, class: u8) -> c_int {
        let slot = CLASSES.iter().position(|(c, _)| *c == class).unwrap_or(0);
        if self.agents[slot] == NOT_YET {
            let version = c_int::from(CLASSES[slot].1);
            // SAFETY: the port is open; a NULL method mask registers no
            // unsolicited methods (answers to our requests still arrive).
            self.agents[slot] = unsafe {
                (self.f.register)(
                    self.port,
                    c_int::from(CLASSES[slot].0),
                    version,
                    0,
                    std::ptr::null_mut(),
                )
            };
        }
        self.agents[slot]
    }

    /// Sends one MAD of management `class` to `dlid`: an SMP to QP0 (the
    /// LID-routed or the directed-route agent), a Performance Management
    /// GMP to QP1 with its Q_Key. The kernel gives it `timeout_ms` for an
    /// answer (no retries: the caller retries).
    pub fn send(
        &mut self,
        dlid: u16,
        class: u8,
        mad: &[u8; MAD_SIZE],
        timeout_ms: i32,
    ) -> Result<(), String> {
        let (qp, qkey) = match class {
            CLASS_PERF | CLASS_SA => (1, QP1_QKEY),
            _ => (0, 0),
        };
        let agent = self.agent(class);
        if agent < 0 {
            return Err(format!(
                "no agent of management class {class:#04x}: {}",
                errno(agent)
            ));
        }
        // The Q_Key's bits as the C int umad_set_addr takes (it is stored
        // as a 32-bit big-endian value).
        let qkey = c_int::from_ne_bytes(qkey.to_ne_bytes());
        let umad = self.send_buf.as_mut_ptr().cast::<c_void>();
        // SAFETY: umad points to an 8-byte aligned buffer of umad_size() +
        // MAD_SIZE bytes (its header zeroed at open; umad_set_addr and
        // umad_send set the same fields at every send); umad_get_mad
        // returns the MAD inside it, MAD_SIZE bytes long.
        let r = unsafe {
            let dst = (self.f.get_mad)(umad).cast::<u8>();
            std::ptr::copy_nonoverlapping(mad.as_ptr(), dst, MAD_SIZE);
            (self.f.set_addr)(umad, c_int::from(dlid), qp, 0, qkey);
            (self.f.send)(
                self.port,
                agent,
                umad,
                c_int::try_from(MAD_SIZE).unwrap_or(256),
                timeout_ms,
                0,
            )
        };
        if r < 0 {
            return Err(format!("umad_send: {}", errno(r)));
        }
        Ok(())
    }

    /// The next MAD within `wait_ms` (0: only one already come, without
    /// waiting), or `None` when none came. The MAD is borrowed until the
    /// next receive.
    pub fn recv(&mut self, wait_ms: i32) -> Result<Option<Received<'_>>, String> {
        let umad = self.recv_buf.as_mut_ptr().cast::<c_void>();
        let mut len: c_int = c_int::try_from(MAD_SIZE).unwrap_or(256);
        // SAFETY: the buffer holds umad_size() + len bytes; umad_recv writes
        // at most that and sets len to the MAD's length. With a wait of 0
        // it does not poll: the port is open non-blocking, a read with
        // nothing come returns EAGAIN.
        let r = unsafe { (self.f.recv)(self.port, umad, &raw mut len, wait_ms.max(0)) };
        if r == -libc::ETIMEDOUT || r == -libc::EINTR || r == -libc::EAGAIN {
            return Ok(None);
        }
        if r < 0 {
            return Err(format!("umad_recv: {}", errno(r)));
        }
        let n = usize::try_from(len).unwrap_or(0).min(MAD_SIZE);
        // SAFETY: as above; the MAD inside the buffer has n <= MAD_SIZE
        // bytes and lives as long as the borrow of self.
        let (status, mad) = unsafe {
            let src = (self.f.get_mad)(umad).cast::<u8>();
            ((self.f.status)(umad), std::slice::from_raw_parts(src, n))
        };
        Ok(Some(Received { status, mad }))
    }
}

impl Drop for Umad {
    fn drop(&mut self) {
        // SAFETY: the port is open and the handle live (or NULL: the
        // caller's, see `open_with`); neither is used after this (closing
        // the port unregisters the agents).
        unsafe {
            (self.f.close_port)(self.port);
            if !self.lib.is_null() {
                libc::dlclose(self.lib);
            }
        }
    }
}

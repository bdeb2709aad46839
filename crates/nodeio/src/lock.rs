//! Lock files: `flock` on a file nobody else can open (mode 0600, owned by
//! root or the caller, in a directory reached under [`Judge::Trusted`]), so no
//! other user can hold it and stall or freeze the holders. The kernel
//! releases the lock when its holder dies. Waits are bounded by an instant:
//! a waiter sleeps in `flock` (the holder's release wakes it at once) and an
//! [`Alarm`] ends the wait at the instant.
//!
//! [`Alarm`]: crate::alarm::Alarm
//!
//! [`Judge::Trusted`]: crate::walk::Judge::Trusted

use std::os::fd::OwnedFd;
use std::time::Instant;

use rustix::fs::{self as rfs, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::alarm::Alarm;
use crate::error::{Error, Result};
use crate::walk::{Dir, trusted_uid};

/// A held lock; dropping it releases it.
#[derive(Debug)]
pub struct Lock {
    _fd: OwnedFd,
}

/// Takes the exclusive lock `dir/name`, waiting until `until`. `until` in the
/// past: one try.
pub fn acquire(dir: &Dir, name: &str, until: Instant) -> Result<Lock> {
    let path = dir.child(name);
    let fd = rfs::openat(
        dir.fd(),
        name,
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(Error::errno("open lock", &path))?;
    let st = rfs::fstat(&fd).map_err(Error::errno("inspect", &path))?;
    if !trusted_uid(st.st_uid) {
        return Err(Error::untrusted(
            &path,
            format!(
                "is owned by uid {}; refusing to use it as a lock",
                st.st_uid
            ),
        ));
    }
    if st.st_mode & 0o777 != 0o600 {
        // An older version made it 0644: anyone could open it and hold it;
        // a umask (0277) may have made it narrower than 0600.
        rfs::fchmod(&fd, Mode::from_raw_mode(0o600)).map_err(Error::errno("chmod", &path))?;
    }
    let start = Instant::now();
    match rfs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => return Ok(Lock { _fd: fd }),
        Err(Errno::WOULDBLOCK | Errno::INTR) => {}
        Err(e) => return Err(Error::errno("lock", &path)(e)),
    }
    let timeout = || Error::LockTimeout {
        path: path.clone(),
        waited_ms: start.elapsed().as_millis(),
    };
    if Instant::now() >= until {
        return Err(timeout());
    }
    let alarm = Alarm::at(until).map_err(|e| Error::io("arm the timer of", &path)(e.into()))?;
    loop {
        match rfs::flock(&fd, FlockOperation::LockExclusive) {
            Ok(()) => {
                drop(alarm);
                return Ok(Lock { _fd: fd });
            }
            Err(Errno::INTR) if Instant::now() >= until => return Err(timeout()),
            Err(Errno::INTR) => {}
            Err(e) => return Err(Error::errno("lock", &path)(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::walk::{Judge, open_dir};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::time::Duration;

    #[test]
    fn private_bounded_and_exclusive() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = open_dir(tmp.path(), tmp.path(), Judge::Trusted, None).expect("dir");
        let p = tmp.path().join("m.lock");
        std::fs::write(&p, "").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let held = acquire(&dir, "m.lock", Instant::now()).expect("locked");
        assert_eq!(std::fs::metadata(&p).expect("md").mode() & 0o777, 0o600);
        let e = acquire(&dir, "m.lock", Instant::now() + Duration::from_millis(20)).unwrap_err();
        assert!(matches!(e, Error::LockTimeout { .. }), "{e}");
        drop(held);
        assert!(acquire(&dir, "m.lock", Instant::now()).is_ok());
    }

    /// A waiter sleeps in the kernel and gets the lock when the holder lets
    /// it go, long before its own instant; the timer it armed is gone after.
    #[test]
    fn a_waiter_takes_the_lock_at_its_release() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = open_dir(tmp.path(), tmp.path(), Judge::Trusted, None).expect("dir");
        let held = acquire(&dir, "m.lock", Instant::now()).expect("locked");
        let path = tmp.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            let dir = open_dir(&path, &path, Judge::Trusted, None).expect("dir");
            let start = Instant::now();
            let got = acquire(&dir, "m.lock", start + Duration::from_secs(60));
            (got.is_ok(), start.elapsed())
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(held);
        let (ok, waited) = waiter.join().expect("waiter");
        assert!(ok, "the waiter did not get the lock");
        assert!(waited < Duration::from_secs(60), "{waited:?}");
    }
}

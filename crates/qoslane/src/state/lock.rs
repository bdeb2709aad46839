//! The node lock: one qoslane transaction at a time on a node. Prologs and
//! Epilogs of different jobs run concurrently; this serialises them with a
//! bounded wait (flock, released by the kernel if the holder dies).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use rustix::fs::{FlockOperation, flock};

use crate::deadline::Deadline;
use crate::error::{Error, Result};

#[derive(Debug)]
pub struct NodeLock {
    _file: File,
}

impl NodeLock {
    /// Waits for the lock until `deadline`, backing off from 200 µs to 5 ms.
    pub fn acquire(path: &Path, deadline: &Deadline) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
            .map_err(Error::io("open lock", path))?;
        let start = std::time::Instant::now();
        let mut pause = Duration::from_micros(200);
        loop {
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(Self { _file: file }),
                Err(rustix::io::Errno::WOULDBLOCK) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(Error::io("lock", path)(e.into())),
            }
            let left = deadline.remaining();
            if left.is_zero() {
                return Err(Error::LockTimeout {
                    path: path.to_owned(),
                    waited: start.elapsed(),
                });
            }
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(Duration::from_millis(5));
        }
    }
}

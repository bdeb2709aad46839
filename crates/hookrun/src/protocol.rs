//! Slurm's TaskProlog protocol: stdout lines beginning, at column 0, with
//! `export NAME=value`, `unset NAME` or `print text` change the task's
//! environment or print to its output. slurmstepd ignores anything else, but
//! hookrun keeps stdout for protocol lines only, so a hook's chatter can never be
//! mistaken for (or hide) an instruction.

/// The prefixes slurmstepd acts on, each with its separating space.
pub const PREFIXES: [&[u8]; 3] = [b"export ", b"unset ", b"print "];

/// Whether a TaskProlog stdout line is a protocol instruction.
pub fn is_protocol_line(line: &[u8]) -> bool {
    PREFIXES.iter().any(|prefix| line.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_column_zero_instructions_count() {
        for line in [
            &b"export UCX_IB_SL=3"[..],
            b"unset OMPI_MCA_x",
            b"print qoslane: level high",
            b"export A=",
        ] {
            assert!(is_protocol_line(line), "{}", String::from_utf8_lossy(line));
        }
        for line in [
            &b" export A=1"[..],
            b"exported 3 things",
            b"Export A=1",
            b"export",
            b"echo hi",
            b"",
            b"\texport A=1",
        ] {
            assert!(!is_protocol_line(line), "{}", String::from_utf8_lossy(line));
        }
    }
}

"""The hardware kit: 'hw' on a real SMT machine, its report, the rehearsal
in an SMT8 guest and the proofs that its switch matches the built patches."""

//! The ranks `structlearn train` runs among: one process, or — started by
//! `mpirun -n R` in a build with the `mpi` feature — rank `r` of `R` MPI
//! processes (docs/guide/scaling.md).

use std::sync::Arc;

use anyhow::Result;
use oracles::{Collective, SingleProcess};

/// This process's place among the ranks of a run. MPI (if started) is
/// finalised when it drops.
pub struct Ranks {
    collective: Arc<dyn Collective>,
    #[cfg(feature = "mpi")]
    mpi: Option<(Arc<structlearn::mpi::MpiRanks>, mpi::environment::Universe)>,
}

impl Ranks {
    /// One process, unless started by an MPI launcher: then MPI is
    /// initialised (with the `mpi` feature) or, without it, an error says so
    /// (each of the `R` processes would otherwise train alone on all data).
    pub fn start() -> Result<Ranks> {
        let launched = structlearn::mpi::launched_ranks();
        #[cfg(feature = "mpi")]
        if let Some(launched) = launched {
            let (universe, ranks) = structlearn::mpi::MpiRanks::init()?;
            if ranks.ranks() != launched {
                // e.g. `srun --mpi=none -n 4`: four MPI worlds of one process each.
                anyhow::bail!(
                    "started by a launcher as one of {launched} processes, but MPI sees {} (without the launcher's \
                     MPI support each process would train alone): start it with mpirun, or with srun --mpi=pmix \
                     (or pmi2) under Slurm",
                    ranks.ranks()
                );
            }
            let ranks = Arc::new(ranks);
            return Ok(Ranks { collective: ranks.clone(), mpi: Some((ranks, universe)) });
        }
        #[cfg(not(feature = "mpi"))]
        if let Some(r) = launched.filter(|&r| r > 1) {
            anyhow::bail!(
                "started by an MPI launcher as one of {r} processes, but this structlearn was built without MPI \
                 (cargo build --release -p structlearn-cli --features mpi); each process would train alone on all \
                 the data"
            );
        }
        let _ = launched;
        Ok(Ranks {
            collective: Arc::new(SingleProcess),
            #[cfg(feature = "mpi")]
            mpi: None,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.collective.rank()
    }

    /// The number of ranks.
    pub fn count(&self) -> usize {
        self.collective.ranks()
    }

    /// Whether this process writes the run's files and reports progress (rank 0).
    pub fn is_root(&self) -> bool {
        self.rank() == 0
    }

    /// The ranks as the learner's [`Collective`].
    pub fn collective(&self) -> Arc<dyn Collective> {
        self.collective.clone()
    }

    /// Ends the run on every rank after `error` on this one: over MPI, prints
    /// it with the rank and aborts every process (`MPI_Abort`) so that none
    /// waits for this one for ever. In one process (the only case without
    /// MPI), returns the error.
    pub fn fail(&self, error: anyhow::Error) -> Result<()> {
        #[cfg(feature = "mpi")]
        if let Some((mpi, _)) = &self.mpi
            && self.count() > 1
        {
            // One write, so that the lines of ranks failing together do not interleave.
            let line = format!("error: rank {} of {}: {}\n", self.rank(), self.count(), crate::error_text(&error));
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            mpi.abort(1);
        }
        Err(error)
    }
}

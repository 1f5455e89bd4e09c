//! MPI ranks as a [`oracles::Collective`] (`MpiRanks`, cargo feature `mpi`;
//! rsmpi over the system's MPI library): data-parallel training across
//! processes and machines, `mpirun -n R structlearn train …`
//! (docs/guide/scaling.md). [`launched_ranks`] is in every build.

#[cfg(feature = "mpi")]
pub use with_mpi::MpiRanks;

#[cfg(feature = "mpi")]
mod with_mpi {
    use std::sync::Mutex;

    use mpi::Count;
    use mpi::Threading;
    use mpi::collective::CommunicatorCollectives;
    use mpi::datatype::PartitionMut;
    use mpi::environment::Universe;
    use mpi::point_to_point::{Destination, Source};
    use mpi::topology::{Communicator, Rank, SimpleCommunicator};
    use oracles::Collective;

    use crate::LearnError;

    /// The processes of `MPI_COMM_WORLD` as ranks. Sums gather every rank's
    /// vector (`MPI_Allgatherv`) and add them in rank order on every rank, so
    /// the result is the same bits everywhere and from run to run, whatever
    /// reduction algorithm the MPI library would choose.
    pub struct MpiRanks {
        world: Mutex<SimpleCommunicator>,
        rank: usize,
        ranks: usize,
    }

    impl std::fmt::Debug for MpiRanks {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("MpiRanks").field("rank", &self.rank).field("ranks", &self.ranks).finish()
        }
    }

    // SAFETY: MPI is initialised with `Threading::Serialized` (checked in
    // `init`), which allows calls from any thread as long as no two are
    // concurrent; every call goes through the mutex.
    unsafe impl Send for MpiRanks {}
    // SAFETY: as above.
    unsafe impl Sync for MpiRanks {}

    impl MpiRanks {
        /// Initialises MPI (`MPI_Init_thread`, serialised calls from any thread)
        /// and returns the universe (MPI is finalised when it drops: keep it for
        /// the whole run) and the world's ranks. Errors if MPI was initialised
        /// already or the library cannot serialise calls from several threads.
        ///
        /// ```no_run
        /// # fn main() -> Result<(), structlearn::LearnError> {
        /// use std::sync::Arc;
        /// use structlearn::{Dataset, Learner, LearnerKind, TrainConfig, build_learner};
        /// let (_universe, ranks) = structlearn::mpi::MpiRanks::init()?; // MPI_Finalize when `_universe` drops
        /// let rank = oracles::Collective::rank(&ranks);
        /// let train = Dataset::load_block("train.sld".as_ref(), rank, oracles::Collective::ranks(&ranks))?;
        /// let specs = vec![("unary".into(), serde_json::json!({"kind": "linear"})), ("pairwise".into(), serde_json::json!({"kind": "linear"}))];
        /// let mut learner = build_learner(LearnerKind::Algorithm1, &train, &specs, TrainConfig::default())?;
        /// learner.distribute(Arc::new(ranks))?;
        /// let outcome = learner.train()?; // the same model on every rank
        /// if rank == 0 {
        ///     outcome.model.save("model.slm".as_ref())?;
        /// }
        /// # Ok(()) }
        /// ```
        pub fn init() -> Result<(Universe, MpiRanks), LearnError> {
            let (universe, threading) = mpi::initialize_with_threading(Threading::Serialized)
                .ok_or_else(|| LearnError::Ranks("MPI was initialised already".into()))?;
            if threading < Threading::Serialized {
                return Err(LearnError::Ranks(format!(
                    "the MPI library supports {threading:?} threading; training needs Serialized"
                )));
            }
            let world = universe.world();
            let (rank, ranks) = (world.rank() as usize, world.size() as usize);
            Ok((universe, MpiRanks { world: Mutex::new(world), rank, ranks }))
        }

        /// Ends every rank's process with `code` (`MPI_Abort`): what a rank that
        /// fails does, so that the others do not wait for it for ever.
        pub fn abort(&self, code: i32) -> ! {
            self.world.lock().unwrap_or_else(|e| e.into_inner()).abort(code)
        }

        /// The communicator, one caller at a time.
        fn world(&self) -> std::sync::MutexGuard<'_, SimpleCommunicator> {
            self.world.lock().unwrap_or_else(|e| e.into_inner())
        }
    }

    impl Collective for MpiRanks {
        fn rank(&self) -> usize {
            self.rank
        }
        fn ranks(&self) -> usize {
            self.ranks
        }
        /// `MPI_Allgather` of the lengths, then `MPI_Allgatherv` of the values.
        fn gather(&self, values: &[f64]) -> Vec<f64> {
            let world = self.world();
            let count = Count::try_from(values.len()).expect("a message of more than 2^31 numbers");
            let mut counts = vec![0 as Count; self.ranks];
            world.all_gather_into(&count, &mut counts[..]);
            let displs: Vec<Count> = counts.iter().scan(0, |at, &c| Some(std::mem::replace(at, *at + c))).collect();
            let mut all = vec![0.0; counts.iter().map(|&c| c as usize).sum()];
            let mut partition = PartitionMut::new(&mut all[..], counts, &displs[..]);
            world.all_gather_varcount_into(values, &mut partition);
            all
        }
        /// `MPI_Send`.
        fn send(&self, to: usize, values: &[f64]) {
            self.world().process_at_rank(to as Rank).send(values);
        }
        /// `MPI_Recv`.
        fn receive(&self, from: usize, values: &mut [f64]) {
            self.world().process_at_rank(from as Rank).receive_into(values);
        }
    }
}

/// The environment variables that carry the number of processes a launcher
/// started, in the order they are read: Open MPI's `mpirun`
/// (`OMPI_COMM_WORLD_SIZE`), MPICH's launcher and Slurm's `srun --mpi=pmi2`
/// (`PMI_SIZE`), and Slurm's `srun` with any MPI plugin, PMIx included
/// (`SLURM_STEP_NUM_TASKS`, set for the tasks of a job step, not in a batch
/// script itself).
pub const LAUNCHER_SIZE_VARIABLES: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"];

/// The number of processes `mpirun`, `srun` or another MPI launcher started
/// this one among, read from the launcher's environment
/// ([`LAUNCHER_SIZE_VARIABLES`]) without initialising MPI; `None` when not
/// started by a launcher. Also in builds without the `mpi` feature, so that
/// such a build can refuse to train alone in each of `R` processes.
pub fn launched_ranks() -> Option<usize> {
    launched_ranks_from(|name| std::env::var(name).ok())
}

/// [`launched_ranks`] with the environment read through `var`.
///
/// ```
/// use structlearn::mpi::launched_ranks_from;
/// assert_eq!(launched_ranks_from(|v| (v == "OMPI_COMM_WORLD_SIZE").then(|| "4".to_string())), Some(4));
/// // srun --mpi=pmix sets no MPI variable of its own before MPI starts.
/// assert_eq!(launched_ranks_from(|v| (v == "SLURM_STEP_NUM_TASKS").then(|| "64".to_string())), Some(64));
/// assert_eq!(launched_ranks_from(|_| None), None);
/// ```
pub fn launched_ranks_from(var: impl Fn(&str) -> Option<String>) -> Option<usize> {
    LAUNCHER_SIZE_VARIABLES.iter().find_map(|name| var(name).and_then(|v| v.trim().parse().ok()))
}

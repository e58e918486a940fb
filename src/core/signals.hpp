#pragma once
// core/signals: the preemption flag of `hsipipe train`. SIGTERM and SIGUSR1 ask a training to write a
// checkpoint and stop (train/trainer.hpp: the ranks agree on the flag between steps). Slurm and srun may
// deliver them to a rank at any moment of its life: before training starts (plugin loading, MPI start-up,
// shard loading), after train() returned (writing results, MPI_Finalize), or as srun --kill-on-bad-exit's
// SIGTERM once another rank exited 75. main() therefore installs the handler first thing for `train` and
// the default action is never restored: a signal is recorded, never fatal, and one that arrives before
// training starts still stops it at its first step. Other commands keep the default actions.
#include <string>

namespace hsipipe {

/// Installs, for SIGTERM and SIGUSR1, a handler (SA_RESTART) that records the signal's number for
/// preempt_signal(). Process-wide and for the rest of the process's life; calling it again changes nothing.
void install_preempt_handlers();

/// The number of the last SIGTERM/SIGUSR1 received since install_preempt_handlers(), or 0.
/// Async-signal-safe; any thread.
int preempt_signal() noexcept;

/// For a command that a signal may end mid-work (decode, stage): SIGINT, SIGTERM and SIGHUP write
/// "hsipipe: interrupted by SIGTERM: TEXT" to stderr, then end the process by the signal's default action (its
/// exit status unchanged). Call once TEXT is known (on one rank). Not for train, whose SIGTERM checkpoints.
void install_interrupt_note(const std::string& text);
/// The default actions again (once the work the note describes is done).
void clear_interrupt_note();

}  // namespace hsipipe

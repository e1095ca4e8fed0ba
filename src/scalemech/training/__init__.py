"""Training one model: the resumable, deterministic loop (``train``) and its checkpoints, snapshots
and run identity (``checkpoints``)."""

"""What every layer shares: checked files (``integrity``), every path of a run (``layout``), the tidy
tables and their schema (``tables``), the device (``device``), seeds (``seeding``) and the training
recipe (``recipe``). Imports nothing of scalemech."""

"""Running the workflow: one job function per rule (``jobs``), the run-time estimate printed before a
run (``estimate``), the wall and CPU record of a whole run (``runrecord``) and the toy paper
configuration with its fixtures (``smoke``)."""

"""The pages' forms: a new experiment (and the side panel's spec), a new sweep or search, a run's words
and the runs table's controls, and the team and visibility every owned thing has."""

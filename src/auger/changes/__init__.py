"""Seeing, holding back and taking back what a turn changed in the project.

`apply_patch` applies the patch envelope models are trained on, all or nothing; `snapshots` records
the working tree as git objects in auger's own repository (never the user's); `diff` shows what
changed between two snapshots; `undo` puts the tree back exactly as a snapshot recorded it.
"""

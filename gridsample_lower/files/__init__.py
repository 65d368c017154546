"""Model files, handled so that a model is never lost or damaged.

``model_io`` reads and checks them and saves them; ``atomic`` writes through temporary files
and renames, data first; ``external_data`` locates, keeps and writes external weights.
"""

"""The lowering: every GridSample replaced by primitive standard ops.

Nodes are found (``inventory``), read (``spec``), chosen for (``targets``, ``selection``) and
replaced (``rule``, ``passes``, ``functions``), each mode by its decomposition (``registry``,
``decompositions``) over shared coordinate (``coords``) and gather-and-sum (``sampling``) code,
emitted through ``emitter``; ``index_range`` says what int32 indices cannot reach.
"""

"""Out-of-core partitioning: graphs whose edges and node data stay on disk, memory-mapped.

:mod:`.scratch` owns the temporary files; :mod:`.csr_build` builds the CSR by destination (and
METIS's symmetric adjacency) from edge chunks in a counting pass and a fill pass, never as an
in-memory edge array; :mod:`.npy_dir` reads the npy-dir input layout (``docs/format.md``) into a
:class:`~partitioners.graph.Graph` whose arrays are memory maps. The methods, the quality report
and the writer then read that graph chunk by chunk. This package is torch-free.
"""

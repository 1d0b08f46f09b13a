# List helpers other cores call in C (batch.pyx).

cpdef tuple split_by_header(list msgs, int id)

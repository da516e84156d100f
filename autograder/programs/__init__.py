"""Programs as evidence: exporting a student's function (artifacts, exported) and the
facts read from a program's text (a StableHLO reader, op counts, the largest array,
where work lies, while-loop trip counts, jaxprs). Imports only ``core``.
"""

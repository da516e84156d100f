"""The check vocabulary every check is written in: how a check observes, expects and
explains (check), the failure messages (feedback), the wire format between the
student's kernel and the grader (wire), values and pytrees (numeric), rubric lines,
quiet output, probes run inside the sandbox, and drawn inputs. Imports nothing else
of the package.
"""

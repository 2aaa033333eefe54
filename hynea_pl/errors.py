"""One-line error messages for the command line and for per-case records."""

from __future__ import annotations


def one_line(error: BaseException) -> str:
    """The error message on one line, naming the problem.

    jsonargparse wraps errors raised while parsing or building a component ("Parser key "model": Does not
    validate against any of the Union subtypes ... Errors: - <the real error>"): the key and the real error are
    picked out of that list and joined.
    """
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    if not any(line.startswith("Does not validate against any of the Union subtypes") for line in lines):
        return lines[0]
    head = [lines[0]] if lines[0].startswith("Parser key") else []
    causes: list[list[str]] = []
    for line in lines[lines.index("Errors:") + 1 if "Errors:" in lines else 1:]:
        if line.startswith("Given value"):
            break
        if line.startswith("- "):
            causes.append([line[2:]])
        elif causes:
            causes[-1].append(line)
    causes = [cause for cause in causes if "Expected a <class 'NoneType'>" not in cause[0]]
    return " ".join([*head, *(causes[0] if causes else lines[1:2])])

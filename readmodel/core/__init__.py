"""The vocabulary every layer speaks, and the rules of the values it is made of.

Owns: the result structs (msgspec), the seventeen ``SESSION_QUERY_*`` error
codes, request shapes, engine configuration, JavaScript value semantics the
reference's answers depend on, cancellation (``AbortSignal``) and JSON output.

Imports: nothing of the project (the standard library, msgspec).
"""

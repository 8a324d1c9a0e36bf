"""The machine description: the instruction table (its forms, encodings and
semantics), the instruction sets, register families, calling conventions
and object formats, combined in a `Target`. It imports nothing else of the
package: the IR, the passes and the back end read it."""

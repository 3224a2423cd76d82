"""Typed wide-row entity columns from Iglu JSON Schemas, as Snowplow's RDB transformer types its Parquet.

Upstream writes each entity family of a wide row as a column typed from the family's JSON Schemas: an unstruct
event as a struct, contexts as an array of structs, with every revision and addition of one model merged into one
column, and a breaking revision in a `<column>_recovered_<M_R_A>_<hash>` column of its own. This package ports that
typing to PySpark types, and turns entity JSON text into the typed values with Spark built-ins only (no Python on the
per-row path).

Modules: `json_schema` (a schema as schema-ddl decodes it), `for_storage` (`Mutate.forStorage`), `ddl_types`
(schema-ddl's Parquet types: `Field.buildType`, `Suggestion`), `normalize` (field names; `_refuse_shared_fields`),
`migrations` (`Migrations.mergeSchemas`), `scala_hash` (the recovered columns' hash), `columns` (`family_columns`,
`TypedColumn`), and per row `values` (`typed_value`) and `cast` (`cast_failed`), with `row_access` shared by both.

Ported from, and kept close to (function by function, so a reader can check one against the other):
  - schema-ddl 0.27.0, `iglu.schemaddl.parquet`: `Field.build` / `buildRepeated` / `normalize` (snake_cased names,
    colliding names collapsed; refused within one schema here, see Parity), `Suggestion` (types from `type`,
    `format`, `enum`, `minimum`/`maximum`, `multipleOf`; anything else is JSON text), `Migrations.mergeSchemas`
    (additions appended at the end, removals kept as nullable, any type change breaking); and the parts of
    `iglu.schemaddl.jsonschema` those read: how a schema is decoded (circe: numbers, `type` unions),
    `Mutate.forStorage` (oneOf / anyOf and tuple items folded into plain schemas through `Narrowed` and `Widened`).
  - rdb-loader 6.1.5, `NonAtomicFieldsProvider` (one family's columns: the merged base column first, then a
    recovered column for each breaking version present in the batch) and `ParquetTransformer` (which entities go in
    a column: those whose version is one of the column's matching versions).

Parity:
  - Column names and types are upstream's, field order and nullability included, and so is the recovered
    column's hash: `abs(Field.hashCode)`, Scala 2.12's MurmurHash3 of the case class, reproduced in `_scala_hash`
    (checked against the hashes in rdb-loader's tests). Spark writes the typed values as upstream's Parquet schema.
  - Per row, values are upstream's for data that fits the type, except: JSON leaves (`Type.Json`, JSON text) come
    from Spark's variant, so object keys come out sorted and numbers as the variant holds them (`1.50` as `1.5`,
    `1e2` as `100.0`; circe keeps the input's text). Properties of one schema that normalize alike (`fooBar`,
    `foo_bar`) are one field upstream, which keeps one of their values; here the schema is refused
    (`_refuse_shared_fields`). Keys of different versions that do (`aField` in 1-0-0, `a_field` in 1-0-1) still
    share the field, read from the first of them the entity has (upstream: the first whose value casts).
  - Data that does not fit is a bad row upstream; here `cast_failed` tells it (see there for the few cases where
    it decides otherwise, e.g. an integer field holding `1.0`).
"""

// Package refdata holds the reference-data state of the msgx-refdata goka
// table (one [State] per RTYPE) and the pure transition function that
// applies SIS reference messages to it ([Apply]; docs/design.md#refdata).
//
// Nothing in this package performs I/O or reads a clock: every instant comes
// in as an argument. The processor in processors/refdata reads the category
// from its goka table, calls Apply, writes Result.Upserts/Result.Deletes to
// PostgreSQL (ref_master) and stores the state back.
//
// Three kinds of category exist:
//   - the 13 categories of docs/design.md#refdata, each with a fixed key tag
//     ([Categories]);
//   - RSTA, the resource status, keyed by RTYP and RSID ([StatusKey]);
//   - other reference TYPEs seen in the SIS samples ([FirstChildTypes]), keyed
//     by the first child element of each record, which the codec reports
//     because a Record map has lost document order.
package refdata

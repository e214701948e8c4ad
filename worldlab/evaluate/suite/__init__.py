"""The full suite's protocols, one module each (`evaluate.registry` lists them in the order
they run): `held_out` (next chunk, drift, camera following), `runtime`, `revisit`, `long`,
`events`, `generalisation`. `base` is the seam they plug into (`Protocol`, `SuiteRun`,
`SuiteSizes`); `walks` records the held-out walks they share."""

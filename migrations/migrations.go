package migrations

import "embed"

// FS holds every *.up.sql / *.down.sql file of this directory.
//
//go:embed *.sql
var FS embed.FS

package sink

import (
	"io"

	"github.com/golang-migrate/migrate/v4/source/iofs"

	"msgx/migrations"
)

// UpMigrationBody is the body Migrate runs for version v (tests only).
func UpMigrationBody(v uint) ([]byte, error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return nil, err
	}
	r, _, err := cleanOnCommit{src}.ReadUp(v)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// CursorQueries exposes the SQL the read models read the ingest state with
// to the plan test.
var CursorQueries = map[string]string{
	"cursor":      sqlCursorRow,
	"holes":       sqlHoleCount,
	"recentHoles": sqlRecentHoles,
	"lateRows":    sqlLateRows,
}

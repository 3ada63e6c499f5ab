// Package need is the one check every component's Deps.Validate makes of
// its collaborators: each missing one is a line naming the component and
// what it lacks ("flights: no PostgreSQL pool"), the database call timeout
// names its variable (MSGX_DB_TIMEOUT), and all of them are reported at
// once, so that a wiring mistake is one error, not a panic later.
package need

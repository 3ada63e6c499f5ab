package router

import (
	"msgx/internal/sample"
	"msgx/tables/route/routetest"
)

// The messages the tests route (routetest, shared with the tests of the
// routing core in tables/route).
var (
	shanghai  = routetest.Shanghai
	msg       = routetest.Msg
	fltr      = routetest.Fltr
	dnld      = routetest.Dnld
	rsta      = routetest.Rsta
	rstaRec   = routetest.RstaRec
	abdg      = routetest.Abdg
	day       = routetest.Day
	sampleXML = sample.XML
)

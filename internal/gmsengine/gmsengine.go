// Package gmsengine builds go-mysql-server engines one at a time.
//
// sqle.New (and NewDefault) re-initialise the process-wide status
// variables (variables.InitStatusVariables) with plain, unsynchronised
// writes, so two engines built at once — the front's server starting
// while a wrapped query's post-processing builds its own, or two
// post-processings — race. Every engine dpproxy builds goes through
// NewDefault, which holds one lock while go-mysql-server builds it: the
// only process-wide state in dpproxy, because the library's is.
package gmsengine

import (
	"sync"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/sql"
)

// building serialises sqle.NewDefault (see the package comment).
var building sync.Mutex

// NewDefault is sqle.NewDefault(pro), built while no other engine is.
func NewDefault(pro sql.DatabaseProvider) *sqle.Engine {
	building.Lock()
	defer building.Unlock()
	return sqle.NewDefault(pro)
}

package mysqlfront

import (
	"net"

	"github.com/dolthub/vitess/go/mysql"
)

// nativeAuth narrows GMS's auth server to mysql_native_password, the plugin
// of every catalog user, and makes it answer for every user name. GMS's
// methods only "handle" users that exist, so vitess tells an unknown user
// "No authentication methods available" (error 2012) while a known user with
// a wrong password gets 1045: a way to probe for user names. Here both get
// 1045 Access denied, as in MySQL. Clients asking for caching_sha2_password
// (MySQL 8 clients) are switched to mysql_native_password.
type nativeAuth struct {
	mysql.AuthServer
}

func (a nativeAuth) AuthMethods() []mysql.AuthMethod {
	var out []mysql.AuthMethod
	for _, m := range a.AuthServer.AuthMethods() {
		if m.Name() == mysql.MysqlNativePassword {
			out = append(out, nativeMethod{m})
		}
	}
	return out
}

func (a nativeAuth) DefaultAuthMethodDescription() mysql.AuthMethodDescription {
	return mysql.MysqlNativePassword
}

type nativeMethod struct {
	mysql.AuthMethod
}

// HandleUser accepts every user name; HandleAuthPluginData refuses unknown
// users with 1045.
func (nativeMethod) HandleUser(*mysql.Conn, string) bool { return true }

// HandleAuthPluginData refuses a scramble shorter than 20 bytes before GMS's
// check, which would index past its end.
func (m nativeMethod) HandleAuthPluginData(c *mysql.Conn, user string, serverData, clientData []byte, remote net.Addr) (mysql.Getter, error) {
	if len(clientData) != 0 && len(clientData) < 20 {
		return nil, mysql.NewSQLError(mysql.ERAccessDeniedError, mysql.SSAccessDeniedError, "Access denied for user '%v'", user)
	}
	return m.AuthMethod.HandleAuthPluginData(c, user, serverData, clientData, remote)
}

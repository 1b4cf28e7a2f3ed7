package admin

import (
	"net/http"

	"github.com/parleyhq/parley/agent/mcp"
)

// mcpOAuthCallback is where an authorization server sends the operator's
// browser after a `parley mcp login`: mcp.CallbackHandler passes the
// answer to the login waiting for its state, through the Redis every
// replica shares, so any replica's console may receive it. It needs no
// console sign-in: the browser arrives from the authorization server, and
// the single-use state the login recorded is what is checked.
func (s *Server) mcpOAuthCallback() http.Handler {
	return mcp.CallbackHandler(mcp.RedisTokens{Client: s.cfg.Redis, Prefix: s.cfg.Prefix}, s.log)
}

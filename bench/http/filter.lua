-- wrk script: POST the ExtenderArgs in BODY_FILE to /scheduler/filter.
local path = os.getenv("BODY_FILE")
local f = assert(io.open(path, "rb"))
local body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.path = "/scheduler/filter"
wrk.body = body
wrk.headers["Content-Type"] = "application/json"

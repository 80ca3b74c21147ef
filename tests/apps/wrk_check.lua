-- wrk script: every response must be 200 with exactly the served file as its body.
-- Usage: wrk -s wrk_check.lua URL -- FILE. Prints "bodies checked: N right, N wrong".
local threads = {}

function setup(thread)
    table.insert(threads, thread)
end

function init(args)
    local f = assert(io.open(args[1], "rb"))
    expected = f:read("*a")
    f:close()
    right, wrong = 0, 0
end

function response(status, headers, body)
    if status == 200 and body == expected then
        right = right + 1
    else
        wrong = wrong + 1
    end
end

function done(summary, latency, requests)
    local r, w = 0, 0
    for _, t in ipairs(threads) do
        r = r + t:get("right")
        w = w + t:get("wrong")
    end
    io.write(string.format("bodies checked: %d right, %d wrong\n", r, w))
end

-- placement.lua: the string logic of deploy/slurm/qoslane_placement.lua.in, without Slurm. Run by
-- tests/e2e/placement.sh as `lua5.1 placement.lua RENDERED` on a copy rendered with the table
-- mission-critical -> qoslane_mc, high -> qoslane_high and the any-node feature "qoslane":
-- job_submit.lua (the module inlined), or the module qoslane_placement.lua, called as a site's
-- own script calls it.
-- Prints one line per failed case and "N failed" or "all ok"; exits 1 on any failure.
local logged = {}
slurm = {
   SUCCESS = 0,
   log_info = function() end,
   log_error = function(...) table.insert(logged, string.format(...)) end,
}
local loaded = dofile(arg[1])
if type(loaded) == "table" then
   -- the module: a site's job_submit.lua calls it from its own functions
   function slurm_job_submit(job_desc, part_list, submit_uid)
      loaded.job_submit(job_desc, part_list, submit_uid)
      return slurm.SUCCESS
   end
   function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
      loaded.job_modify(job_desc, job_rec, part_list, modify_uid)
      return slurm.SUCCESS
   end
elseif slurm_job_submit == nil or slurm_job_modify == nil then
   print("FAIL " .. arg[1] .. " defines neither the module nor Slurm's two functions")
   os.exit(1)
end

local function submit(qos, features, default_qos)
   local jd = { qos = qos, features = features, default_qos = default_qos, user_id = 0 }
   slurm_job_submit(jd, {}, 0)
   return tostring(jd.features)
end
local function modify(new_qos, new_features, rec_qos, rec_features, job_state)
   local jd = { qos = new_qos, features = new_features }
   slurm_job_modify(jd, { qos = rec_qos, features = rec_features, job_id = 7, job_state = job_state or 0 }, {}, 0)
   return tostring(jd.features)
end

local failed = 0
local function eq(what, got, want)
   if got ~= want then
      failed = failed + 1
      print("FAIL " .. what .. ": got '" .. got .. "', want '" .. want .. "'")
   end
end

-- at submit: --qos, the association's default, Slurm's last resort ("normal")
eq("--qos of a fail_job level", submit("mission-critical", nil), "qoslane_mc")
eq("the association's default QoS", submit(nil, nil, "mission-critical"), "qoslane_mc")
eq("no QoS, no default: normal, unconstrained", submit(nil, nil, nil), "nil")
eq("an unconstrained level keeps the user's OR", submit("normal", "a|b"), "a|b")
eq("a QoS list takes every listed level", submit("normal,mission-critical,high", nil), "qoslane_high&qoslane_mc")
-- Slurm finds a QoS whatever its case (assoc_mgr_fill_in_qos: strcasecmp) and stores it in lower
-- case: --qos=Mission-Critical is the level's QoS, as the Prolog reads it (level_for_qos)
eq("--qos in another case", submit("Mission-Critical", nil), "qoslane_mc")
-- the user's constraint kept
eq("AND", submit("mission-critical", "a&b"), "a&b&qoslane_mc")
eq("OR is grouped first", submit("mission-critical", "a|b"), "(a|b)&qoslane_mc")
eq("a group with an OR inside", submit("mission-critical", "(a|b)&c"), "(a|b)&c&qoslane_mc")
eq("matching OR", submit("mission-critical", "[a|b]"), "[a|b]&qoslane_mc")
eq("the user's own qoslane feature kept at submit", submit("mission-critical", "a&qoslane_high"), "a&qoslane_high&qoslane_mc")
eq("counts: each counted term", submit("mission-critical", "[a*1&b*2]"), "[(a&qoslane_mc)*1&(b&qoslane_mc)*2]&qoslane_mc")
eq("counts: a counted AND group", submit("mission-critical", "[(a&c)*1&b*2]"), "[(a&c&qoslane_mc)*1&(b&qoslane_mc)*2]&qoslane_mc")
eq("counts: a counted OR is left", submit("mission-critical", "[(a|c)*1&b*2]"), "[(a|c)*1&b*2]")
eq("counts: outside brackets left", submit("mission-critical", "a*2"), "a*2")
eq("left constraints are logged", tostring(#logged), "2")
-- scontrol update job: QoS or constraint changed on a pending job
eq("QoS to unconstrained: the user's OR back", modify("normal", nil, "mission-critical", "(a|b)&qoslane_mc"), "a|b")
eq("QoS to unconstrained, nothing left: the any-node feature", modify("normal", nil, "mission-critical", "qoslane_mc"), "qoslane")
eq("QoS to another level", modify("high", nil, "mission-critical", "qoslane_mc"), "qoslane_high")
eq("QoS from unconstrained", modify("mission-critical", nil, "normal", "qoslane"), "qoslane_mc")
eq("QoS from unconstrained with an OR", modify("mission-critical", nil, "normal", "a|b"), "(a|b)&qoslane_mc")
eq("QoS changed to one in another case", modify("MISSION-CRITICAL", nil, "normal", "qoslane"), "qoslane_mc")
eq("the user's new constraint", modify(nil, "z|y", "mission-critical", "qoslane_mc"), "(z|y)&qoslane_mc")
eq("the user's cleared constraint", modify(nil, "", "mission-critical", "qoslane_mc"), "qoslane_mc")
eq("a pending job with a flag (requeued) is still pending", modify("normal", nil, "mission-critical", "qoslane_mc", 0x400), "qoslane")
eq("a running job's QoS change: the constraint is not touched", modify("normal", nil, "mission-critical", "qoslane_mc", 1), "nil")
eq("another update: nothing", modify(nil, nil, "mission-critical", "qoslane_mc"), "nil")
eq("QoS change with counts", modify("high", nil, "mission-critical", "[(a&qoslane_mc)*1&(b&qoslane_mc)*2]&qoslane_mc"),
   "[(a&qoslane_high)*1&(b&qoslane_high)*2]&qoslane_high")
eq("a user's counted term of the any-node feature is the user's", modify("high", nil, "normal", "[rackA*1&qoslane*1]"),
   "[(rackA&qoslane_high)*1&(qoslane&qoslane_high)*1]&qoslane_high")
eq("QoS change with counts to unconstrained", modify("normal", nil, "mission-critical", "[(a&qoslane_mc)*1&b*2]&qoslane_mc"),
   "[(a)*1&b*2]")

print(failed == 0 and "all ok" or (failed .. " failed"))
os.exit(failed == 0 and 0 or 1)

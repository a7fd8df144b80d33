# windows.ps1 - the Windows acceptance run on a real host with an NVIDIA GPU
# (docs/windows.md): what wine cannot show. Copy build-win\ (the output of
# `make windows` on Debian) to the host and run, in PowerShell:
#
#   powershell -ExecutionPolicy Bypass -File windows.ps1 -BuildDir .\build-win
#       [-NvmlLibrary C:\Windows\System32\nvml.dll] [-Write]
#
# Without -Write nothing is changed on the GPU. With -Write, from an
# elevated PowerShell, GPU 0's power limit is set to the middle of its range,
# read back and restored to what it was; from a non-elevated one, the same
# write must be refused by the driver (zeusd answers 403 there).
# zeusd.exe (PowerShell 7 or later: -SkipHttpErrorCheck) is started on
# 127.0.0.1:$Port (--mode tcp) over the same NVML and
# asked over HTTP: GPUs found, power read, persistence mode as Windows has
# it, one stream event (curl.exe, in Windows 10 and later), and with -Write
# the power limit set and restored through zeusd (or the 403 when not
# elevated). zeusd.exe is ended with Stop-Process at the end: its clean
# stop on Ctrl-C is checked by hand (press Ctrl-C in a console running it:
# it logs event=stopping event=ctrl_c and event=stopped, exit 0).
# The named pipe (on the simulator, nvml-sim.dll): served and answered
# (pipe_client.exe); a second zeusd on the same name refused; run NOT
# elevated, the pipe's DACL: the default SDDL lets this user in, an
# administrators-only one shuts it out (access denied, error 5); run
# elevated, zeusd.exe as a service (New-Service, Start-Service: Running
# and serving the pipe; Stop-Service: Stopped, then removed).
# Exits 0 when every check passed, 1 otherwise. Not yet run on a real host:
# written with the wine tests (tests/integration/test_windows.py) as the
# model.
param(
    [Parameter(Mandatory = $true)][string]$BuildDir,
    [string]$NvmlLibrary = "nvml.dll",
    [int]$Port = 4938,
    [switch]$Write
)
$ErrorActionPreference = "Stop"
# PowerShell before 7.3 drops empty arguments and mangles embedded quotes
# when it starts a native program; the argv check needs the standard rules.
$PSNativeCommandArgumentPassing = "Standard"
$modernArgs = $PSVersionTable.PSVersion -ge [version]"7.3"
$failed = 0

function Check($name, [scriptblock]$body) {
    try {
        & $body
        Write-Host "ok    $name"
    } catch {
        Write-Host "FAIL  $name : $_"
        $script:failed++
    }
}

function Run($exe, [string[]]$argv) {
    $out = & (Join-Path $BuildDir $exe) @argv 2>$null
    return @{ Code = $LASTEXITCODE; Out = ($out -join "`n") }
}

$elevated = ([Security.Principal.WindowsPrincipal] `
    [Security.Principal.WindowsIdentity]::GetCurrent()).IsInRole(
    [Security.Principal.WindowsBuiltInRole]::Administrator)
Write-Host "host: $env:COMPUTERNAME  elevated: $elevated  nvml: $NvmlLibrary"

Check "the real NVML loads through the daemon's backend and reads every GPU" {
    $r = Run "nvml_probe.exe" @($NvmlLibrary, "read")
    Write-Host $r.Out
    if ($r.Code -ne 0) { throw "exit $($r.Code)" }
    if ($r.Out -notmatch "backend=nvml count=([1-9][0-9]*)") { throw "no GPU" }
    if ($r.Out -notmatch "power_mw=[1-9]") { throw "no power reading" }
}

if ($Write) {
    if ($elevated) {
        Check "an administrator sets GPU 0's power limit and it is restored" {
            $r = Run "nvml_probe.exe" @($NvmlLibrary)
            Write-Host $r.Out
            if ($r.Code -ne 0) { throw "exit $($r.Code)" }
            if ($r.Out -notmatch "set_limit_mw=(\d+) read_back_mw=(\d+)") { throw "no write" }
            if ($Matches[1] -ne $Matches[2]) { throw "read back $($Matches[2]), set $($Matches[1])" }
            if ($r.Out -match "restore_error") { throw "limit not restored" }
        }
    } else {
        Check "a user who is not an administrator is refused by the driver (403)" {
            $r = Run "nvml_probe.exe" @($NvmlLibrary, "denied")
            Write-Host $r.Out
            if ($r.Code -ne 0) { throw "the write was not refused" }
            if ($r.Out -notmatch "status=403") { throw "not a 403" }
        }
    }
}

Check "zeus.exe measures a command over NVML and keeps its exit status" {
    $env:ZEUS_NVML_LIBRARY = $NvmlLibrary
    $r = Run "zeus.exe" @("measure", "--json", "--output", "-", "--",
        "cmd.exe", "/c", "ping -n 3 127.0.0.1 >NUL & exit 3")
    Remove-Item Env:\ZEUS_NVML_LIBRARY
    Write-Host $r.Out
    if ($r.Code -ne 3) { throw "exit $($r.Code), want 3" }
    $j = ($r.Out -split "`n" | Where-Object { $_ -like "{*" } | Select-Object -Last 1) | ConvertFrom-Json
    if (-not $j.gpu_energy_j) { throw "no GPU energy" }
}

if (-not $modernArgs) {
    Write-Host "skip  argv check: needs PowerShell 7.3 or later"
} else { Check "zeus.exe passes arguments with spaces and quotes intact" {
    $argv = @("two words", 'say "hi"', "C:\dir with space\", "")
    $r = Run "zeus.exe" @(@("measure", "--output", "NUL", "--",
        (Join-Path $BuildDir "argv_echo.exe")) + $argv)
    $got = $r.Out -split "`n" | Where-Object { $_ -like "arg=*" } | ForEach-Object {
        $h = $_.Substring(4)
        -join ($(for ($i = 0; $i -lt $h.Length; $i += 2) {
            [char][Convert]::ToByte($h.Substring($i, 2), 16) }))
    }
    if (($got -join "|") -ne ($argv -join "|")) { throw "got: $($got -join '|')" }
} }

Check "zeus.dll loads and answers" {
    $r = Run "dll_probe.exe" @()
    if ($r.Out -notmatch "^version=") { throw $r.Out }
}

$zeusdArgs = @("serve", "--mode", "tcp", "--tcp-bind-address", "127.0.0.1:$Port")
if ($NvmlLibrary -ne "nvml.dll") { $zeusdArgs += @("--nvml-library", $NvmlLibrary) }
$zlog = Join-Path $env:TEMP "zeusd-acceptance.log"
$zeusd = Start-Process -FilePath (Join-Path $BuildDir "zeusd.exe") `
    -ArgumentList $zeusdArgs -PassThru -NoNewWindow `
    -RedirectStandardError $zlog
$base = "http://127.0.0.1:$Port"
Start-Sleep -Seconds 3

Check "zeusd.exe serves the GPUs over TCP" {
    $d = Invoke-RestMethod "$base/discover"
    if ($d.gpus.Count -lt 1) { throw "no GPU: $(Get-Content $zlog -Raw)" }
    if (($d.enabled_api_groups -join ",") -ne "gpu-control,gpu-read,metrics") {
        throw "groups: $($d.enabled_api_groups -join ',')" }
    $p = Invoke-RestMethod "$base/gpu/get_power?gpu_ids=0"
    if ($p.power_mw."0" -le 0) { throw "no power reading" }
}

Check "zeusd.exe: persistence mode reads true and cannot be disabled" {
    $m = Invoke-RestMethod "$base/gpu/get_persistence_mode?gpu_ids=0"
    if (-not $m."0".enabled) { throw "reads false" }
    $r = Invoke-WebRequest -Method Post -SkipHttpErrorCheck `
        "$base/gpu/set_persistence_mode?gpu_ids=0&enabled=false&block=true"
    if ($r.StatusCode -ne 400) { throw "status $($r.StatusCode)" }
}

Check "zeusd.exe streams power (one event)" {
    $out = & curl.exe -s -N -m 3 "$base/gpu/stream_power?gpu_ids=0"
    if (($out -join "`n") -notmatch 'data: \{"timestamp_ms":\d+,"gpu_id":0') {
        throw "no event" }
}

if ($Write) {
    Check "zeusd.exe sets GPU 0's power limit (or answers 403 when not elevated)" {
        $c = Invoke-RestMethod "$base/gpu/get_power_limit_constraints?gpu_ids=0"
        $old = (Invoke-RestMethod "$base/gpu/get_power_limit?gpu_ids=0")."0".power_limit_mw
        $mid = [int](($c."0".min_power_limit_mw + $c."0".max_power_limit_mw) / 2)
        $r = Invoke-WebRequest -Method Post -SkipHttpErrorCheck `
            "$base/gpu/set_power_limit?gpu_ids=0&power_limit_mw=$mid&block=true"
        if (-not $elevated) {
            if ($r.StatusCode -ne 403) { throw "status $($r.StatusCode), want 403" }
            return
        }
        if ($r.StatusCode -ne 200) { throw "status $($r.StatusCode): $($r.Content)" }
        $now = (Invoke-RestMethod "$base/gpu/get_power_limit?gpu_ids=0")."0".power_limit_mw
        $null = Invoke-WebRequest -Method Post `
            "$base/gpu/set_power_limit?gpu_ids=0&power_limit_mw=$old&block=true"
        if ($now -ne $mid) { throw "read back $now, set $mid" }
    }
}
Stop-Process -Id $zeusd.Id -ErrorAction SilentlyContinue

# ---- the named pipe: what wine does not enforce ------------------------------
function Start-PipeZeusd([string]$name, [string[]]$extra) {
    $log = Join-Path $env:TEMP "zeusd-pipe-$([guid]::NewGuid()).log"
    $p = Start-Process -FilePath (Join-Path $BuildDir "zeusd.exe") `
        -ArgumentList (@("serve", "--simulate", "--pipe-name", $name) + $extra) `
        -PassThru -NoNewWindow -RedirectStandardError $log
    Start-Sleep -Seconds 3
    return @{ Proc = $p; Log = $log }
}
$pipeName = "\\.\pipe\zeusd-acceptance"

Check "zeusd.exe serves the named pipe; a second one on the name is refused" {
    $z = Start-PipeZeusd $pipeName @()
    try {
        $r = Run "pipe_client.exe" @("get", $pipeName, "/time", "2")
        if ($r.Out -notmatch "status=200") { throw "no answer: $($r.Out)" }
        $second = Start-Process -FilePath (Join-Path $BuildDir "zeusd.exe") `
            -ArgumentList @("serve", "--simulate", "--pipe-name", $pipeName) `
            -PassThru -NoNewWindow -Wait `
            -RedirectStandardError (Join-Path $env:TEMP "zeusd-second.log")
        if ($second.ExitCode -ne 1) { throw "second zeusd exit $($second.ExitCode)" }
        if ((Get-Content (Join-Path $env:TEMP "zeusd-second.log") -Raw) -notmatch `
            "another process already serves it") { throw "no refusal message" }
    } finally { Stop-Process -Id $z.Proc.Id -ErrorAction SilentlyContinue }
}

if (-not $elevated) {
    Check "the pipe's DACL: default lets this user in, administrators-only does not" {
        $z = Start-PipeZeusd "$pipeName-open" @()
        try {
            $r = Run "pipe_client.exe" @("get", "$pipeName-open", "/time", "1")
            if ($r.Out -notmatch "status=200") { throw "default SDDL: $($r.Out)" }
        } finally { Stop-Process -Id $z.Proc.Id -ErrorAction SilentlyContinue }
        $z = Start-PipeZeusd "$pipeName-admin" @("--pipe-sddl", "D:(A;;GA;;;BA)(A;;GA;;;SY)")
        try {
            $r = Run "pipe_client.exe" @("get", "$pipeName-admin", "/time", "1")
            if ($r.Out -notmatch "open_error=5") { throw "admin-only SDDL: $($r.Out)" }
        } finally { Stop-Process -Id $z.Proc.Id -ErrorAction SilentlyContinue }
    }
} else {
    Write-Host "skip  pipe DACL check: run this script again NOT elevated"
    Check "zeusd.exe as a service: Running and serving the pipe, then Stopped" {
        $svc = "zeusd-acceptance"
        $exe = Join-Path (Resolve-Path $BuildDir) "zeusd.exe"
        $null = New-Service -Name $svc -StartupType Manual -BinaryPathName `
            "`"$exe`" serve --simulate --pipe-name $pipeName-svc"
        try {
            Start-Service -Name $svc
            if ((Get-Service $svc).Status -ne "Running") { throw "not running" }
            $r = Run "pipe_client.exe" @("get", "$pipeName-svc", "/time", "1")
            if ($r.Out -notmatch "status=200") { throw "no answer: $($r.Out)" }
            Stop-Service -Name $svc
            if ((Get-Service $svc).Status -ne "Stopped") { throw "not stopped" }
        } finally {
            Stop-Service -Name $svc -ErrorAction SilentlyContinue
            & sc.exe delete $svc | Out-Null
        }
    }
}

if ($failed -gt 0) { Write-Host "$failed check(s) failed"; exit 1 }
Write-Host "all checks passed"
exit 0

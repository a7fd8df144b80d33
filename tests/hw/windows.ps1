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
# Exits 0 when every check passed, 1 otherwise. Not yet run on a real host:
# written with the wine tests (tests/integration/test_windows.py) as the
# model; zeusd.exe's checks join it when zeusd.exe builds.
param(
    [Parameter(Mandatory = $true)][string]$BuildDir,
    [string]$NvmlLibrary = "nvml.dll",
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

if ($failed -gt 0) { Write-Host "$failed check(s) failed"; exit 1 }
Write-Host "all checks passed"
exit 0

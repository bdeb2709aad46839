//! Management Datagrams as bytes: the SMP, PMA and SA Gets the in-process
//! reader ([`super::umad`], [`super::smp_batch`]) sends, and the attributes
//! it reads out of the answers, into the same types the `smpquery` and
//! `perfquery` parsers give ([`crate::fabric::tables`],
//! [`crate::fabric::counters::pma`]). Pure: bytes in, bytes or tables out.
//!
//! The layout is the InfiniBand Architecture's (Vol. 1, 13.4, 14.2.5 and
//! 16.1): a 256-byte MAD, a 24-byte common header; an SMP's M_Key at 24,
//! directed route fields at 32 (DrSLID, DrDLID), its 64-byte attribute at 64
//! ([`SmpData`]), the initial and return paths at 128 and 192; a
//! Performance Management GMP's 40 reserved bytes at 24 and its 192-byte
//! attribute at 64 ([`PmaData`]: PortXmitDataSL's SL 15 lies at 64..68 of
//! it, past an SMP's area). The two areas are two types: an SMP decoder
//! cannot be handed a PMA answer. Checked against the bytes real `smpquery`
//! exchanges on the simulated fabric (`tests/fixtures/smp-mad/`, recorded
//! by `rigs/record_smp_mads.sh`); the PMA attributes' field offsets are
//! libibmad's (rdma-core `libibmad/fields.c`: PortSelect at bit 8,
//! CounterSelect at bit 16, the counters from bit 32) and their IDs
//! `libibmad/mad.h`'s (`IB_GSI_PORT_XMIT_DATA_SL` 0x36,
//! `IB_GSI_PORT_RCV_DATA_SL` 0x37, `IB_GSI_PORT_PORT_VL_XMIT_WAIT_COUNTERS`
//! 0x1C).

use std::fmt;

use crate::fabric::tables::{NodeInfo, NodeType, PortInfoVls, Sl2Vl, VlArbEntry, VlRange};

/// The size of a MAD on the wire.
pub const MAD_SIZE: usize = 256;
/// Where an SMP's and a PMA GMP's attribute data start.
pub const DATA_OFFSET: usize = 64;
/// An SMP's attribute data: 64 bytes.
pub const SMP_DATA_SIZE: usize = 64;
/// A Performance Management GMP's attribute data: the MAD less its 24-byte
/// common header and 40 reserved bytes.
pub const PMA_DATA_SIZE: usize = MAD_SIZE - DATA_OFFSET;

/// An SMP's attribute data (and an SA answer's, read at its offset).
pub type SmpData = [u8; SMP_DATA_SIZE];

/// A PMA answer's attribute data, whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmaData(pub [u8; PMA_DATA_SIZE]);

/// The attribute data of one management class, as taken out of a MAD.
pub trait AttrData: Sized {
    /// How many bytes from [`DATA_OFFSET`].
    const SIZE: usize;
    /// From exactly [`Self::SIZE`] bytes.
    fn from_area(area: &[u8]) -> Self;
}

impl AttrData for SmpData {
    const SIZE: usize = SMP_DATA_SIZE;
    fn from_area(area: &[u8]) -> Self {
        let mut d = [0u8; SMP_DATA_SIZE];
        d.copy_from_slice(area);
        d
    }
}

impl AttrData for PmaData {
    const SIZE: usize = PMA_DATA_SIZE;
    fn from_area(area: &[u8]) -> Self {
        let mut d = [0u8; PMA_DATA_SIZE];
        d.copy_from_slice(area);
        Self(d)
    }
}

/// Management class: LID-routed SMP.
pub const CLASS_LID_ROUTED: u8 = 0x01;
/// Management class: directed-route SMP.
pub const CLASS_DIRECTED: u8 = 0x81;
/// Management class: Performance Management (a GMP to the port's PMA, QP1).
pub const CLASS_PERF: u8 = 0x04;
/// Subnet Administration (GMPs to the SM's LID, class version 2).
pub const CLASS_SA: u8 = 0x03;
const SA_CLASS_VERSION: u8 = 2;
/// A PathRecord's component mask: DLID and SLID given.
const PR_COMPMASK_DLID_SLID: u64 = (1 << 4) | (1 << 5);
/// The well-known Q_Key of QP1 (GMPs).
pub const QP1_QKEY: u32 = 0x8001_0000;
const BASE_VERSION: u8 = 1;
const CLASS_VERSION: u8 = 1;
const METHOD_GET: u8 = 0x01;
const METHOD_SET: u8 = 0x02;
const METHOD_GET_RESP: u8 = 0x81;
/// The permissive LID, directed-route SMPs' SLID and DLID.
pub const PERMISSIVE_LID: u16 = 0xffff;

/// The attributes qoslane reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Attr {
    NodeDesc,
    NodeInfo,
    PortInfo,
    SlToVl,
    VlArbitration,
    /// LinearForwardingTable: 64 LIDs' out ports per block (the modifier).
    LinearForwarding,
    /// An SA PathRecord (a GMP: [`Route::Sa`]; the modifier: SLID << 16 |
    /// DLID).
    PathRecord,
    /// The same, the query also carrying one field an SM's QoS policy
    /// matches (a level's `sm_traffic`).
    PathRecordBy(PathKey),
    /// PortVLXmitWaitCounters (a PMA attribute: [`Route::Perf`]).
    VlXmitWait,
    /// PortXmitDataSL (a PMA attribute): data sent per SL.
    XmitDataSl,
    /// PortRcvDataSL (a PMA attribute): data received per SL.
    RcvDataSl,
    /// The same attribute Set to clear every VL's counter (CounterSelect
    /// all ones); its answer holds the cleared counters.
    VlXmitWaitClear,
}

impl Attr {
    pub fn id(self) -> u16 {
        match self {
            Self::NodeDesc => 0x0010,
            Self::NodeInfo => 0x0011,
            Self::PortInfo => 0x0015,
            Self::SlToVl => 0x0017,
            Self::VlArbitration => 0x0018,
            Self::LinearForwarding => 0x0019,
            Self::PathRecord | Self::PathRecordBy(_) => 0x0035,
            Self::VlXmitWait | Self::VlXmitWaitClear => 0x001C,
            Self::XmitDataSl => 0x0036,
            Self::RcvDataSl => 0x0037,
        }
    }

    /// As smpquery names the query.
    pub fn name(self) -> &'static str {
        match self {
            Self::NodeDesc => "nodedesc",
            Self::NodeInfo => "nodeinfo",
            Self::PortInfo => "portinfo",
            Self::SlToVl => "sl2vl",
            Self::VlArbitration => "vlarb",
            Self::LinearForwarding => "lft",
            Self::PathRecord | Self::PathRecordBy(_) => "pathrecord",
            Self::VlXmitWait => "vlxmitcounters",
            Self::VlXmitWaitClear => "vlxmitcounters (clear)",
            Self::XmitDataSl => "xmtsl",
            Self::RcvDataSl => "rcvsl",
        }
    }
}

/// A path record query's field an SM's QoS policy matches (OpenSM
/// doc/QoS_management_in_OpenSM.txt): what the audit asks the SA with for
/// each declared `sm_traffic` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathKey {
    ServiceId(u64),
    /// With its membership bit, as a query carries it.
    Pkey(u16),
    /// 12 bits.
    QosClass(u16),
}

impl PathKey {
    /// The PathRecord component mask bits (IBA 15.2.5.16: ServiceID 0-1,
    /// P_Key 13, QoSClass 14) and where the field lies in the record.
    fn encode(self, record: &mut [u8]) -> u64 {
        match self {
            Self::ServiceId(v) => {
                record[0..8].copy_from_slice(&v.to_be_bytes());
                0b11
            }
            Self::Pkey(v) => {
                record[50..52].copy_from_slice(&v.to_be_bytes());
                1 << 13
            }
            Self::QosClass(v) => {
                // QoSClass is the upper 12 bits of the 16 it shares with SL.
                record[52..54].copy_from_slice(&((v & 0xfff) << 4).to_be_bytes());
                1 << 14
            }
        }
    }
}

impl fmt::Display for PathKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ServiceId(v) => write!(f, "service ID {v:#x}"),
            Self::Pkey(v) => write!(f, "PKey {v:#06x}"),
            Self::QosClass(v) => write!(f, "QoS class {v}"),
        }
    }
}

/// How an SMP reaches its node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// By the destination's LID (the subnet's forwarding tables).
    Lid(u16),
    /// By the out ports from the sending port, one per hop (at most 63).
    Directed(Vec<u8>),
    /// A GMP to the Performance Management agent of the port at this LID
    /// (the Get's modifier is the PortSelect, carried in the data).
    Perf(u16),
    /// A GMP to Subnet Administration at the SM's LID.
    Sa(u16),
}

impl Route {
    /// The DLID of the address the MAD is sent to.
    pub fn dlid(&self) -> u16 {
        match self {
            Self::Lid(l) | Self::Perf(l) | Self::Sa(l) => *l,
            Self::Directed(_) => PERMISSIVE_LID,
        }
    }

    pub fn class(&self) -> u8 {
        match self {
            Self::Lid(_) => CLASS_LID_ROUTED,
            Self::Directed(_) => CLASS_DIRECTED,
            Self::Perf(_) => CLASS_PERF,
            Self::Sa(_) => CLASS_SA,
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lid(l) => write!(f, "lid {l}"),
            Self::Perf(l) => write!(f, "PMA of lid {l}"),
            Self::Sa(l) => write!(f, "SA at lid {l}"),
            Self::Directed(p) => {
                f.write_str("directed route 0")?;
                p.iter().try_for_each(|h| write!(f, ",{h}"))
            }
        }
    }
}

/// One SMP Get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Get {
    pub route: Route,
    pub attr: Attr,
    pub modifier: u32,
}

impl Get {
    /// The attribute modifier on the wire (a PMA Get's is 0: its port is in
    /// the data).
    pub fn wire_modifier(&self) -> u32 {
        match self.route {
            Route::Perf(_) | Route::Sa(_) => 0,
            _ => self.modifier,
        }
    }
}

impl fmt::Display for Get {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.route {
            Route::Perf(_) => "PMA",
            Route::Sa(_) => "SA",
            _ => "SMP",
        };
        write!(
            f,
            "{what} Get {} {:#x} ({})",
            self.attr.name(),
            self.modifier,
            self.route
        )
    }
}

/// The SLtoVLMappingTable modifier of a switch's (in, out) pair.
pub fn sl2vl_modifier(in_port: u32, out_port: u32) -> u32 {
    ((in_port & 0xff) << 8) | (out_port & 0xff)
}

/// The VLArbitrationTable blocks: low 0-31, low 32-63, high 0-31, high 32-63.
pub const VLARB_LOW: [u32; 2] = [1, 2];
pub const VLARB_HIGH: [u32; 2] = [3, 4];

/// The VLArbitrationTable modifier of a block of a port.
pub fn vlarb_modifier(block: u32, port: u32) -> u32 {
    (block << 16) | (port & 0xff)
}

/// Why a MAD could not be made or read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MadError(pub String);

impl fmt::Display for MadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The 256 bytes of `get` with transaction id `tid`.
pub fn encode_get(get: &Get, tid: u64) -> Result<[u8; MAD_SIZE], MadError> {
    let mut m = [0u8; MAD_SIZE];
    m[0] = BASE_VERSION;
    m[1] = get.route.class();
    m[2] = CLASS_VERSION;
    m[3] = METHOD_GET;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&get.attr.id().to_be_bytes());
    m[20..24].copy_from_slice(&get.wire_modifier().to_be_bytes());
    if let Route::Perf(_) = get.route {
        // PortSelect: the second byte of the attribute.
        m[DATA_OFFSET + 1] = u8::try_from(get.modifier)
            .map_err(|_| MadError(format!("a PortSelect of {} (not 0-255)", get.modifier)))?;
    }
    if let Route::Sa(_) = get.route {
        // SA header: SM_Key 0, the component mask at 48; the PathRecord
        // at 56: DLID at +40, SLID at +42.
        m[2] = SA_CLASS_VERSION;
        let mut mask = PR_COMPMASK_DLID_SLID;
        if let Attr::PathRecordBy(key) = get.attr {
            mask |= key.encode(&mut m[SA_DATA..]);
        }
        m[48..56].copy_from_slice(&mask.to_be_bytes());
        let [s1, s0, d1, d0] = get.modifier.to_be_bytes();
        m[SA_DATA + 40..SA_DATA + 44].copy_from_slice(&[d1, d0, s1, s0]);
    }
    if get.attr == Attr::VlXmitWaitClear {
        m[3] = METHOD_SET;
        // CounterSelect: every VL's counter.
        m[DATA_OFFSET + 2..DATA_OFFSET + 4].copy_from_slice(&[0xff, 0xff]);
    }
    if let Route::Directed(path) = &get.route {
        // No hop: the sending port's own node (`smpquery -D … 0`).
        if path.len() > 63 {
            return Err(MadError(format!(
                "a directed route has 0 to 63 hops, not {}",
                path.len()
            )));
        }
        // Hop pointer 0, hop count; the initial path starts at index 1.
        m[7] = u8::try_from(path.len()).unwrap_or(63);
        m[32..34].copy_from_slice(&PERMISSIVE_LID.to_be_bytes());
        m[34..36].copy_from_slice(&PERMISSIVE_LID.to_be_bytes());
        m[129..129 + path.len()].copy_from_slice(path);
    }
    Ok(m)
}

/// Where an SA MAD's data (the PathRecord) starts.
const SA_DATA: usize = 56;

/// The SL of a PathRecord answer: its byte 53 (QoSClass, SL) lands at
/// 45 of the answer's data (which starts at MAD byte 64, the record at 56).
pub fn path_record_sl(d: &SmpData) -> u8 {
    d[SA_DATA + 53 - DATA_OFFSET] & 0x0f
}

/// A Get's answer: its transaction id and attribute data (an SMP's unless
/// asked for a PMA's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer<D = SmpData> {
    pub tid: u64,
    pub attr_id: u16,
    pub modifier: u32,
    pub data: D,
}

/// Reads a GetResp, its data as `D`; a MAD status other than 0 is an error
/// naming it.
pub fn decode_answer<D: AttrData>(mad: &[u8]) -> Result<Answer<D>, MadError> {
    // An SA answer may come as its header and one record (56 + 64 bytes:
    // the simulator's): the rest of the MAD is zeros.
    let mut padded = [0u8; MAD_SIZE];
    let mad = if mad.len() >= SA_DATA + SMP_DATA_SIZE && mad.len() < MAD_SIZE && mad[1] == CLASS_SA
    {
        padded[..mad.len()].copy_from_slice(mad);
        &padded[..]
    } else {
        mad
    };
    if mad.len() < MAD_SIZE {
        return Err(MadError(format!(
            "a MAD of {} bytes (not {MAD_SIZE})",
            mad.len()
        )));
    }
    if ![CLASS_LID_ROUTED, CLASS_DIRECTED, CLASS_PERF, CLASS_SA].contains(&mad[1]) {
        return Err(MadError(format!(
            "management class {:#04x} is not an SMP or a PMA answer",
            mad[1]
        )));
    }
    if mad[3] != METHOD_GET_RESP {
        return Err(MadError(format!("method {:#04x} is not GetResp", mad[3])));
    }
    let mut status = u16::from_be_bytes([mad[4], mad[5]]);
    if mad[1] == CLASS_DIRECTED {
        status &= 0x7fff; // the D (direction) bit
    }
    let u32_at = |i: usize| u32::from_be_bytes([mad[i], mad[i + 1], mad[i + 2], mad[i + 3]]);
    let tid = (u64::from(u32_at(8)) << 32) | u64::from(u32_at(12));
    let attr_id = u16::from_be_bytes([mad[16], mad[17]]);
    let modifier = u32_at(20);
    if status != 0 {
        return Err(MadError(format!(
            "MAD status {status:#06x} ({}) for attribute {attr_id:#06x} modifier {modifier:#x}",
            status_words(status)
        )));
    }
    Ok(Answer {
        tid,
        attr_id,
        modifier,
        data: D::from_area(&mad[DATA_OFFSET..DATA_OFFSET + D::SIZE]),
    })
}

fn status_words(status: u16) -> &'static str {
    match (status >> 2) & 0x7 {
        1 => "bad version",
        2 => "method not supported",
        3 => "method/attribute not supported",
        7 => "invalid attribute or modifier",
        _ if status & 1 != 0 => "busy",
        _ => "error",
    }
}

/// PortInfo.PortState as smpquery prints it.
fn port_state(code: u8) -> String {
    match code {
        0 => "NoChange".into(),
        1 => "Down".into(),
        2 => "Initialize".into(),
        3 => "Armed".into(),
        4 => "Active".into(),
        n => format!("?({n})"),
    }
}

/// The PortInfo fields the checks use (what `parse_portinfo` reads).
pub fn port_info(d: &SmpData) -> Result<PortInfoVls, MadError> {
    let range = |name: &str, code: u8| {
        VlRange::from_code(code).ok_or_else(|| {
            MadError(format!(
                "PortInfo {name} is {code}, not VL0, VL0-1, VL0-3, VL0-7 or VL0-14"
            ))
        })
    };
    Ok(PortInfoVls {
        local_port: u32::from(d[28]),
        link_state: port_state(d[32] & 0x0f),
        vl_cap: range("VLCap", d[37] >> 4)?,
        oper_vls: range("OperVLs", d[43] >> 4)?,
        vlarb_high_cap: d[39],
        vlarb_low_cap: d[40],
    })
}

/// PortInfo's LID (of a switch's port 0: the switch's LID).
pub fn port_lid(d: &SmpData) -> u16 {
    u16::from_be_bytes([d[16], d[17]])
}

/// A NodeDescription: up to 64 bytes of text, NUL-padded, as `smpquery
/// nodedesc` prints it (trimmed).
pub fn node_desc(d: &SmpData) -> String {
    let text = &d[..64];
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    String::from_utf8_lossy(&text[..end]).trim().to_owned()
}

/// An SLtoVLMappingTable: SL 2n in the high nibble of byte n.
pub fn sl2vl(d: &SmpData) -> Sl2Vl {
    let mut t = [0u8; 16];
    for (i, b) in d[..8].iter().enumerate() {
        t[2 * i] = b >> 4;
        t[2 * i + 1] = b & 0x0f;
    }
    // Every nibble is at most 15.
    Sl2Vl::new(t).unwrap_or_else(|| unreachable!("nibbles are below 16"))
}

/// The first `count` (at most 32) entries of a VLArbitrationTable block:
/// VL in the low nibble of the first byte, the weight in the second.
pub fn vlarb_block(d: &SmpData, count: usize) -> Vec<VlArbEntry> {
    d.chunks_exact(2)
        .take(count.min(32))
        .map(|e| VlArbEntry {
            vl: e[0] & 0x0f,
            weight: e[1],
        })
        .collect()
}

/// PortVLXmitWaitCounters: PortSelect in byte 1, then sixteen 16-bit
/// counters from byte 4, VL 0 first.
pub fn vl_xmit_wait(d: &PmaData) -> (u8, [u64; 16]) {
    let d = &d.0;
    let mut t = [0u64; 16];
    for (i, c) in d[4..36].chunks_exact(2).enumerate() {
        t[i] = u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    (d[1], t)
}

/// PortXmitDataSL or PortRcvDataSL: PortSelect in byte 1, CounterSelect
/// in bytes 2-3, then sixteen 32-bit counters from byte 4, SL 0 first (SL
/// 15's at bytes 64..68: past an SMP's data area).
pub fn data_per_sl(d: &PmaData) -> (u8, [u64; 16]) {
    let d = &d.0;
    let mut t = [0u64; 16];
    for (i, c) in d[4..68].chunks_exact(4).enumerate() {
        t[i] = u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    (d[1], t)
}

/// The NodeInfo fields a path check uses (what `parse_nodeinfo` reads).
pub fn node_info(d: &SmpData) -> Result<NodeInfo, MadError> {
    let node_type = match d[2] {
        1 => NodeType::Hca,
        2 => NodeType::Switch,
        3 => NodeType::Router,
        n => return Err(MadError(format!("NodeInfo NodeType is {n}"))),
    };
    let guid = u64::from_be_bytes(d[12..20].try_into().unwrap_or([0; 8]));
    Ok(NodeInfo {
        node_type,
        num_ports: u32::from(d[3]),
        local_port: u32::from(d[36]),
        guid: format!("{guid:#018x}"),
    })
}

#[cfg(test)]
mod tests;

//! Network policies (`[[policy]]`, `policy add`) and the address sets their rules name
//! (`[[address-set]]`, `address-set add`): the policy crate's specification, plus the
//! interfaces a policy applies to.

use serde::{Deserialize, Serialize};

/// A network policy and the interfaces (by name) it applies to; an interface named before it
/// exists gets the policy when it is created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PolicySpec {
    pub name: String,
    #[serde(default)]
    pub interfaces: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<Vec<policy::Rule>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<Vec<policy::Rule>>,
}

impl PolicySpec {
    /// The policy itself, without the interfaces.
    pub fn policy(&self) -> policy::Policy {
        policy::Policy {
            name: self.name.clone(),
            ingress: self.ingress.clone(),
            egress: self.egress.clone(),
        }
    }

    /// What is wrong with the values themselves.
    pub fn problems(&self) -> Vec<String> {
        let mut p = self.policy().problems();
        for (i, f) in self.interfaces.iter().enumerate() {
            if f.is_empty() || self.interfaces[..i].contains(f) {
                p.push(format!("interface {f:?} is empty or listed twice"));
            }
        }
        p
    }
}

/// `[[address-set]]`: a named set of addresses.
pub type AddressSetSpec = policy::SetSpec;

//! The built tree: its parts, its statistics, and the mask walk over it with the parser
//! ([`SubterminalTree::mask_into`]).

use super::{Group, SubterminalTree, TreeNode};
use crate::engine::earley::Parser;
use crate::lexer::{ComponentId, ScanState, Scanner};
use crate::vocab::TokenSet;

impl SubterminalTree {
    /// Whether the build stopped at its work limit ([`super::MAX_TREE_WORK`]).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    pub(crate) fn parts(&self) -> (&[TreeNode], &[u32], &[Group]) {
        (&self.nodes, &self.children, &self.groups)
    }

    pub(crate) fn from_parts(
        end_components: Vec<ComponentId>,
        end_states: Vec<ScanState>,
        nodes: Vec<TreeNode>,
        children: Vec<u32>,
        groups: Vec<Group>,
    ) -> Self {
        SubterminalTree {
            end_components: end_components.into(),
            end_states: end_states.into(),
            nodes,
            children,
            groups,
            overflowed: false,
        }
    }

    /// Components in which some token ends (without a boundary) from this component tree.
    pub fn end_components(&self) -> &[ComponentId] {
        &self.end_components
    }

    /// Scanner states in which some token ends after a boundary, from this component tree.
    pub fn end_states(&self) -> &[ScanState] {
        &self.end_states
    }

    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    pub fn num_groups(&self) -> usize {
        self.groups.len()
    }

    /// Bytes of the tree: nodes, edges, groups and their token lists.
    pub fn memory_bytes(&self) -> usize {
        self.nodes.len() * std::mem::size_of::<TreeNode>()
            + (self.end_states.len() + self.end_components.len() + self.children.len()) * 4
            + self.groups.len() * std::mem::size_of::<Group>()
            + self
                .groups
                .iter()
                .map(|g| g.tokens.memory_bytes())
                .sum::<usize>()
    }

    /// OR into `out` every token whose split the parser accepts, checking at most
    /// `max_inside` inside-token boundaries. `parser` is restored before returning.
    pub fn mask_into(
        &self,
        scanner: &Scanner,
        parser: &mut Parser,
        max_inside: u32,
        out: &mut TokenSet,
    ) {
        self.walk(0, scanner, parser, max_inside, out);
    }

    fn walk(
        &self,
        node: u32,
        scanner: &Scanner,
        parser: &mut Parser,
        max_inside: u32,
        out: &mut TokenSet,
    ) {
        let n = &self.nodes[node as usize];
        {
            let expected = parser.expected();
            for g in &self.groups[n.groups.start as usize..n.groups.end as usize] {
                if scanner
                    .live_terminals(g.live)
                    .iter()
                    .any(|&t| expected.contains(t))
                {
                    g.tokens.union_into(out);
                }
            }
        }
        for &c in &self.children[n.children.start as usize..n.children.end as usize] {
            let child = &self.nodes[c as usize];
            if child.inside > max_inside {
                continue;
            }
            if parser.push(child.terminal) {
                self.walk(c, scanner, parser, max_inside, out);
                parser.pop();
            }
        }
    }
}
